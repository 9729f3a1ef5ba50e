package scenario

import (
	"fmt"
	"slices"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
)

// The queue and the batch: the same sale under redlock, one lock per
// purchase or a batch per hold.
const (
	batchStock       = 150
	batchBuyers      = 300
	batchConcurrency = 32
	batchWork        = 5 * time.Millisecond
	batchStrategy    = "redlock"
)

func batchScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "batch",
		Title: "THE QUEUE AND THE BATCH: a lock per purchase against a batch per hold",
		Shows: "one lock per purchase (batch=1, as in the articles) against up to 100 per hold",
		Story: fmt.Sprintf("%d buyers (%d at a time, over two instances) buy %d units under %s, "+
			"with %s of work per hold of the lock. Buyers wait in line inside each instance and a "+
			"release wakes the next one. First each hold sells one purchase (batch=1, as in the "+
			"articles), then up to 100 of the buyers waiting (SECKILL_BATCH's default).",
			batchBuyers, batchConcurrency, batchStock, batchStrategy, lab.DurWords(batchWork)),
		Run: runBatch,
	}
}

func runBatch(w *lab.World) (*lab.Result, error) {
	ins, err := w.StartInstances(2, lab.Setup{})
	if err != nil {
		return nil, err
	}
	res := &lab.Result{Columns: []string{"BATCH", "LOCK HOLDS", "SOLD", "SALES/S", "P99 OF 201s", "VERDICT"}}
	for _, batch := range []int{1, 100} {
		label := fmt.Sprintf("batch=%d", batch)
		s, err := w.NewSeries(label, label, ins[0], batchStock)
		if err != nil {
			return nil, err
		}
		w.Note("%s: %d buyers", label, batchBuyers)
		holdsBefore, err := holds(w, ins)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		as := w.Crowd(w.Context(), s, ins, batchBuyers, batchConcurrency,
			client.Override{Strategy: batchStrategy, Hold: batchWork, Batch: batch})
		if err := w.Context().Err(); err != nil {
			return nil, err
		}
		holdsAfter, err := holds(w, ins)
		if err != nil {
			return nil, err
		}
		audit, err := w.Finish(s)
		if err != nil {
			return nil, err
		}
		res.Add(batchRow(s, batch, holdsAfter-holdsBefore, start, as, audit))
	}
	res.Notes = []string{
		"The articles' retry storm, every buyer polling Redis in a loop, cannot be shown any more: " +
			"buyers wait in line inside each instance, one of them at a time asks for the lock, and a " +
			"release wakes the next at once. What is left to choose is how much one hold sells.",
	}
	return res, nil
}

// batchRow judges a run of batch from the lock holds h it took, its
// answers as (sent from start on) and the audit: the row, and whether it
// did what it should (sold the stock, batch=1 a hold per sale, a batch
// fewer holds than sales).
func batchRow(s *lab.Series, batch, h int, start time.Time, as []lab.Answer, audit client.Audit) (lab.Row, bool) {
	var lat []time.Duration
	var last time.Time
	for _, a := range as {
		if a.Created() {
			lat = append(lat, a.Took)
			if end := a.Sent.Add(a.Took); end.After(last) {
				last = end
			}
		}
	}
	sold := len(lat)
	rate := 0.0
	if sold > 0 {
		rate = float64(sold) / last.Sub(start).Seconds()
	}
	row := lab.Row{Key: s.ID, Series: s.ID, Flaw: h >= sold,
		Cells: []string{fmt.Sprint(batch), fmt.Sprint(h), fmt.Sprint(sold), fmt.Sprintf("%.0f", rate), ms(p99(lat))}}
	row.Judge(audit, "a lock round trip per sale", fmt.Sprintf("%.1f sales per lock hold", float64(sold)/float64(max(h, 1))))
	return row, audit.Held() && sold == batchStock && row.Flaw == (batch == 1)
}

// holds counts the holds of batchStrategy's lock the instances have made.
func holds(w *lab.World, ins []*lab.Instance) (int, error) {
	n := 0
	for _, in := range ins {
		m, err := in.Client.Metrics(w.Context())
		if err != nil {
			return 0, fmt.Errorf("scenario: %w", err)
		}
		n += int(m.Sum("seckill_batch_size", "strategy", batchStrategy))
	}
	return n, nil
}

// p99 is the 99th percentile of ds.
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}
