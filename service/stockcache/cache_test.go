package stockcache

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
)

// newTestCache is a cache with no database or Redis behind it, whose
// sold-out answer says the stock left, as the service's does.
func newTestCache() *Cache {
	return New(Config{SoldOut: func(product, stock int64) error {
		return fmt.Errorf("product %d has %d left", product, max(stock, 0))
	}})
}

// TestSoldOutAnswer: the cache's sold-out answer is Config.SoldOut's for the
// stock it holds now: it follows the stock down within a generation and
// to a new generation, ignores an older one, and answers nothing to a
// purchase the stock can serve or of a product it has not seen.
func TestSoldOutAnswer(t *testing.T) {
	m := newTestCache()
	check := func(q int64, want string) {
		t.Helper()
		err := m.SoldOutAnswer(1, q)
		switch {
		case want == "" && err != nil:
			t.Errorf("SoldOutAnswer(1, %d) = %v; want nil", q, err)
		case want != "" && (err == nil || err.Error() != want):
			t.Errorf("SoldOutAnswer(1, %d) = %v; want sold out, %q", q, err, want)
		}
	}
	check(1, "")
	at := func(gen, returns int64) Version { return Version{Gen: gen, Returns: returns} }
	m.Saw(1, 5, at(0, 0))
	check(5, "")
	check(6, "product 1 has 5 left")
	m.Saw(1, 0, at(0, 0))
	check(1, "product 1 has 0 left")
	m.Saw(1, 3, at(0, 0)) // the same version cannot raise the stock
	check(1, "product 1 has 0 left")
	m.Saw(1, 2, at(0, 1)) // a return of units can
	check(2, "")
	check(3, "product 1 has 2 left")
	m.Saw(1, 0, at(0, 0)) // a write from before the return changes nothing
	check(2, "")
	m.Reopen(1, at(0, 2)) // a return begins: nothing is sold out from before it
	check(1, "")
	m.Saw(1, 0, at(0, 1)) // a reading from before it changes nothing
	check(1, "")
	m.Saw(1, 1, at(0, 2)) // one of it says what is left
	check(2, "product 1 has 1 left")
	m.Saw(1, 150, at(1, 0)) // a reset to more than any purchase asks
	check(api.MaxQuantity, "")
	check(151, "product 1 has 150 left") // made for the asking
	m.Saw(1, -2, at(1, 0))               // oversold (strategy none)
	check(1, "product 1 has 0 left")
	m.Saw(1, 4, at(0, 7)) // an older generation changes nothing, whatever its returns
	check(1, "product 1 has 0 left")
	if got := m.At(1); got != at(1, 0) {
		t.Errorf("At(1) = %+v; want %+v", got, at(1, 0))
	}
}

// TestSoldOutAnswerConcurrent: answers read while the stock falls (under
// -race) are each of a stock the purchase is sold out of.
func TestSoldOutAnswerConcurrent(t *testing.T) {
	const q = 50
	m := newTestCache()
	m.Saw(1, api.MaxQuantity, Version{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 2000 {
				err := m.SoldOutAnswer(1, q)
				if err == nil {
					continue
				}
				var left int64
				if _, serr := fmt.Sscanf(err.Error(), "product 1 has %d left", &left); serr != nil || left >= q {
					t.Errorf("SoldOutAnswer(1, %d) = %v; want sold out with less than %d left", q, err, q)
					return
				}
			}
		})
	}
	for stock := int64(api.MaxQuantity); stock >= 0; stock-- {
		m.Saw(1, stock, Version{})
	}
	wg.Wait()
	if err := m.SoldOutAnswer(1, 1); err == nil || err.Error() != "product 1 has 0 left" {
		t.Errorf("SoldOutAnswer(1, 1) = %v; want %q", err, "product 1 has 0 left")
	}
}

// TestMessage: an announcement reads back as what was announced, one of
// an earlier release (product:stock:generation) reads with no returns, and
// anything else is refused.
func TestMessage(t *testing.T) {
	want := Version{Gen: 3, Returns: 4}
	product, stock, v, ack, err := parseMessage(Message(7, -2, want))
	if err != nil || product != 7 || stock != -2 || v != want || ack != "" {
		t.Errorf("parseMessage(Message(7, -2, %+v)) = %d, %d, %+v, %q, %v; want 7, -2, %+v, no ack", want, product, stock, v, ack, err, want)
	}
	if _, _, v, ack, err := parseMessage(Message(7, 1, want) + ":t0k3n"); err != nil || v != want || ack != "t0k3n" {
		t.Errorf("parseMessage with an ack = %+v, %q, %v; want %+v, t0k3n", v, ack, err, want)
	}
	if _, stock, v, _, err := parseMessage("7:-:3:4:tok"); err != nil || stock != math.MaxInt64 || v != want {
		t.Errorf("parseMessage of a version begun = %d, %+v, %v; want the stock unknown, %+v", stock, v, err, want)
	}
	if _, _, v, _, err := parseMessage("7:1:2"); err != nil || v != (Version{Gen: 2}) {
		t.Errorf("parseMessage(7:1:2) = %+v, %v; want generation 2, no returns", v, err)
	}
	for _, bad := range []string{"", "7:1", "7:1:2:3:4:5", "7:x:2", "7::2", "7:1:2:y", "7:1:2:3:"} {
		if _, _, _, _, err := parseMessage(bad); err == nil {
			t.Errorf("parseMessage(%q) = nil error; want one", bad)
		}
	}
}

// TestHold: while a return of units holds a product, nothing of it is sold
// out, whatever the cache saw of it, until every hold ends or runs out;
// then what it saw answers again.
func TestHold(t *testing.T) {
	m := newTestCache()
	m.Saw(1, 0, Version{})
	m.Hold(1, "a", time.Minute)
	m.Hold(1, "b", time.Minute)
	m.Hold(2, "c", time.Nanosecond) // runs out at once
	if err := m.SoldOutAnswer(1, 1); err != nil {
		t.Errorf("SoldOutAnswer while held = %v; want nil", err)
	}
	if _, out := m.SoldOut(1, 1); out {
		t.Error("SoldOut while held = true; want false")
	}
	m.release(1, "a")
	if err := m.SoldOutAnswer(1, 1); err != nil {
		t.Errorf("SoldOutAnswer while one of two holds runs = %v; want nil", err)
	}
	m.release(1, "b")
	if err := m.SoldOutAnswer(1, 1); err == nil {
		t.Error("SoldOutAnswer once both holds ended = nil; want sold out")
	}
	m.Saw(2, 0, Version{})
	if _, out := m.SoldOut(2, 1); !out {
		t.Error("SoldOut after its hold ran out = false; want true")
	}
}

// TestParseHold: a hold's and a release's announcements read back; other
// announcements are not theirs, and a broken one is refused.
func TestParseHold(t *testing.T) {
	if h, ok, err := parseHold("hold:7:1500:tok"); !ok || err != nil || h != (holdMessage{product: 7, hold: 1500 * time.Millisecond, token: "tok"}) {
		t.Errorf("parseHold(hold) = %+v, %v, %v; want product 7, 1.5s, tok", h, ok, err)
	}
	if h, ok, err := parseHold("release:7:tok"); !ok || err != nil || h != (holdMessage{product: 7, token: "tok"}) {
		t.Errorf("parseHold(release) = %+v, %v, %v; want product 7, tok", h, ok, err)
	}
	if _, ok, _ := parseHold(Message(7, 1, Version{})); ok {
		t.Error("parseHold(a stock announcement) says it is a hold's")
	}
	for _, bad := range []string{"hold:7:1500", "hold:7:0:tok", "hold:x:5:tok", "hold:7:5:", "release:7", "release:7:a:b", "release::tok", "hold:7:600001:tok", "hold:7:99999999999999999999:tok"} {
		if _, ok, err := parseHold(bad); !ok || err == nil {
			t.Errorf("parseHold(%q) = %v, %v; want its form, refused", bad, ok, err)
		}
	}
}
