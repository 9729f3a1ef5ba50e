package demo_test

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/demo"
	"github.com/seckill/seckill/demo/lab"
)

// want is what one row of a scenario must show: its cells (a cell of ""
// is not checked; "<0", ">0", "=0" compare a number) and whether it shows
// a flaw.
type want struct {
	cells []string
	flaw  bool
}

// wantRows are the rows every scenario must end with, by scenario and row
// key. Each flaw stands beside its fix: the fix's row must not show it.
var wantRows = map[string]map[string]want{
	"failover": {
		// Columns: run, 202s, kept, lost, 503 unknown, sold, left. The
		// writer wrote the first 10 in both; without acks the last 5 were
		// promises, with them every reservation the lagging replica did not
		// acknowledge (the last 10) answered outcome_unknown.
		"asynchronous": {[]string{"asynchronous", "15", "10", "5", "0", "10", "10"}, true},
		"acks 1/250ms": {[]string{"acks 1/250ms", "5", "5", "0", "10", "10", "10"}, false},
	},
	"galera": {
		// Columns: run, nodes, sold, oversold, cert. failures, time.
		// How many transactions certification throws away is chance: none
		// is asked for, not even across two nodes.
		"one node":  {[]string{"one node", "0 and 0", "20", "0", "", ""}, false},
		"two nodes": {[]string{"two nodes", "0 and 2", "20", "0", "", ""}, false},
	},
	"orders": {
		// Columns: strategy, sold, paid, returned, resold, left, audit.
		"redlock": {[]string{"redlock", "30", ">0", ">0", "", "0", "consistent"}, false},
		"reserve": {[]string{"reserve", "30", ">0", ">0", "", "0", "consistent"}, false},
	},
	"reserve": {
		// Columns: run, sold/s, 202s, kept, lost, sold, left.
		"redlock":                     {[]string{"redlock", "", "-", "-", "-", "", ""}, false},
		"reserve":                     {[]string{"reserve", "", "", "", "0", "", ""}, false},
		"reserve, no persistence":     {[]string{"", "-", "10", "0", "10", "20", "0"}, true},
		"reserve, appendfsync always": {[]string{"", "-", "10", "10", "0", "20", "0"}, false},
	},
	"sale": {
		// Columns: strategy, guard, sold, left.
		"none":        {[]string{"none", "", ">0", "<0"}, true},
		"local":       {[]string{"local", "", ">0", "<0"}, true}, // two instances, two mutexes
		"setnx":       {[]string{"setnx", "", "40", "0"}, false},
		"token":       {[]string{"token", "", "40", "0"}, false},
		"redlock":     {[]string{"redlock", "", "40", "0"}, false},
		"pessimistic": {[]string{"pessimistic", "", "40", "0"}, false},
		"optimistic":  {[]string{"optimistic", "", "40", "0"}, false},
		"reserve":     {[]string{"reserve", "", "40", "0"}, false},
	},
	"setnx-clock": {
		// Columns: lock, fencing, buyer A, buyer B (clock ahead), left.
		"setnx fencing=off": {[]string{"setnx", "off", "201 created", "201 created", "-1"}, true},
		"setnx fencing=on":  {[]string{"setnx", "on", "503 lock_lost", "201 created", "0"}, false},
		"token fencing=off": {[]string{"token", "off", "201 created", "409 sold_out", "0"}, false},
	},
	"setnx-unlock": {
		// Columns: lock, fencing, A, B, C, left.
		"setnx fencing=off": {[]string{"setnx", "off", "201", "201", "201", "-1"}, true},
		// A's write may be refused too: when the fence is claimed at every
		// grant, C's grant fences B off and B's fenced A off.
		"setnx fencing=on":  {[]string{"setnx", "on", "", "lock_lost", "201", ">-1"}, false},
		"token fencing=off": {[]string{"token", "off", "201", "201", "sold_out", "0"}, false},
	},
	"lease-overrun": {
		// Columns: lock, what A does, fencing, A, B, left.
		"setnx works":         {[]string{"setnx", "works", "off", "201 created", "201 created", "-1"}, true},
		"token works":         {[]string{"token", "works", "off", "201 created", "409 sold_out", "0"}, false},
		"redlock works":       {[]string{"redlock", "works", "off", "201 created", "409 sold_out", "0"}, false},
		"setnx fencing=off":   {[]string{"setnx", "paused", "off", "201 created", "201 created", "-1"}, true},
		"token fencing=off":   {[]string{"token", "paused", "off", "201 created", "201 created", "-1"}, true},
		"redlock fencing=off": {[]string{"redlock", "paused", "off", "201 created", "201 created", "-1"}, true},
		"setnx fencing=on":    {[]string{"setnx", "paused", "on", "503 lock_lost", "201 created", "0"}, false},
		"token fencing=on":    {[]string{"token", "paused", "on", "503 lock_lost", "201 created", "0"}, false},
		"redlock fencing=on":  {[]string{"redlock", "paused", "on", "503 lock_lost", "201 created", "0"}, false},
	},
	"killed-holder": {
		// Columns: lease, watchdog, blocked, buyers after the kill. Without
		// the watchdog, whether a buyer's wait runs out first depends on
		// how the lease left compares with the lock wait.
		"watchdog=on":  {[]string{"2 s", "on", "", "201"}, false},
		"watchdog=off": {[]string{"8 s", "off", "", ""}, true},
	},
	"node-down": {
		// Columns: lock, needs, sold all up, sold node 1 down, sold back, 503 while down.
		"token":   {[]string{"token", "node 1 alone", ">0", "=0", ">0", ">0"}, true},
		"redlock": {[]string{"redlock", "2 of 3 nodes", ">0", ">0", ">0", "=0"}, false},
	},
	"node-restart": {
		// Columns: lock, fencing, A (nodes 1, 2), B, left.
		"redlock fencing=off": {[]string{"redlock", "off", "201 created", "201 created", "-1"}, true},
		"redlock fencing=on":  {[]string{"redlock", "on", "503 lock_lost", "201 created", "0"}, false},
	},
	"batch": {
		// Columns: batch, lock holds, sold, sales/s, p99. A hold per sale
		// with batch=1; two sales per hold at least with batch=100.
		"batch=1":   {[]string{"1", ">149", "150", "", ""}, true},
		"batch=100": {[]string{"100", "<76", "150", "", ""}, false},
	},
	"ip-limit": {
		// Columns: counter, guarded by, allowed, limit.
		"read-check-write":         {[]string{"read, check, write", "nothing", ">10", "10"}, true},
		"read-check-write token":   {[]string{"read, check, write", "", "10", "10"}, false},
		"read-check-write redlock": {[]string{"read, check, write", "", "10", "10"}, false},
		"incr":                     {[]string{"INCR (SECKILL_IP_LIMIT)", "", "10", "10"}, false},
	},
	"history": {
		// Columns: strategy, sold, left, history.
		"none":    {[]string{"none", ">20", "<0", "NOT linearizable"}, true},
		"redlock": {[]string{"redlock", "20", "0", "linearizable"}, false},
	},
}

// TestScenarios plays every scenario once on the embedded stores, as
// `seckill demo` does, and holds each row to what the articles say: every
// flaw shows without its fix and is gone with it. The printed output fits
// 100 columns, has no log line and no colour.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("plays every scenario")
	}
	logs := logFile(t)
	l, err := lab.NewLab(func(string) string { return "" }, logs)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	results, err := demo.Run(t.Context(), l, demo.Scenarios(), demo.Terminal{Out: &out})
	if err != nil {
		t.Errorf("Run = %v", err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	}()
	if len(results) != len(wantRows) {
		t.Fatalf("Run played %d scenarios; want %d", len(results), len(wantRows))
	}
	for _, res := range results {
		rows, ok := wantRows[res.Scenario]
		if !ok {
			t.Errorf("scenario %s has no expected rows in this test", res.Scenario)
			continue
		}
		if _, ok := res.Row("left out"); ok && leftOutAllowed(t, res.Scenario) {
			continue
		}
		if len(res.Rows) != len(rows) {
			t.Errorf("%s has %d rows; want %d", res.Scenario, len(res.Rows), len(rows))
		}
		for key, w := range rows {
			row, ok := res.Row(key)
			if !ok {
				t.Errorf("%s has no row %q", res.Scenario, key)
				continue
			}
			if row.Flaw != w.flaw || !row.Expected || !cellsMatch(row.Cells, w.cells) {
				t.Errorf("%s %q = %q flaw %t expected %t, verdict %q; want %q flaw %t expected",
					res.Scenario, key, row.Cells, row.Flaw, row.Expected, row.Verdict, w.cells, w.flaw)
			}
			if row.Verdict == "" || strings.Contains(row.Verdict, "UNEXPECTED") {
				t.Errorf("%s %q verdict %q; want plain words", res.Scenario, key, row.Verdict)
			}
		}
		if !res.OK() {
			t.Errorf("%s is not OK", res.Scenario)
		}
	}

	text := out.String()
	for i, line := range strings.Split(text, "\n") {
		if w := demo.VisibleWidth(line); w > demo.Width {
			t.Errorf("line %d is %d columns wide; want at most %d: %q", i+1, w, demo.Width, line)
		}
	}
	for _, bad := range []string{"level=", "time=", "\x1b["} {
		if strings.Contains(text, bad) {
			t.Errorf("output has %q: logs and colour belong elsewhere", bad)
		}
	}
	if !strings.Contains(text, "All as the articles say") {
		t.Errorf("output does not conclude that all went as the articles say")
	}
	// The stores the screen names are those the log names.
	b, err := os.ReadFile(logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	said := regexp.MustCompile(`running on embedded stores.*embedded_sql=(\w+) embedded_redis=(\w+)`).FindAllStringSubmatch(string(b), -1)
	if !strings.Contains(text, "the embedded SQLite and three embedded Redis nodes") || len(said) != len(results) {
		t.Errorf("the screen names its stores %q; the log says so %d times for %d scenarios", strings.SplitN(text, "\n", 2)[0], len(said), len(results))
	}
	for _, m := range said {
		if m[1] != "true" || m[2] != "true" {
			t.Errorf("the log says embedded_sql=%s embedded_redis=%s; the screen says both are embedded", m[1], m[2])
		}
	}
}

// leftOutAllowed says a scenario may be left out (its one row "left out")
// because this machine lacks what it starts: galera, unless
// SECKILL_TEST_GALERA_REQUIRED=1 says Galera is installed (scripts/testenv.sh).
func leftOutAllowed(t *testing.T, scenario string) bool {
	t.Helper()
	if scenario != "galera" || os.Getenv("SECKILL_TEST_GALERA_REQUIRED") == "1" {
		return false
	}
	t.Logf("%s was left out: this machine lacks what it starts", scenario)
	return true
}

// cellsMatch compares cells with want: "" is not checked, "<N", ">N" and
// "=N" compare numbers, anything else text.
func cellsMatch(cells, want []string) bool {
	if len(cells) != len(want) {
		return false
	}
	for i, w := range want {
		if w == "" {
			continue
		}
		if m := regexp.MustCompile(`^([<>=])(-?\d+)$`).FindStringSubmatch(w); m != nil {
			got, err1 := strconv.Atoi(cells[i])
			n, err2 := strconv.Atoi(m[2])
			if err1 != nil || err2 != nil {
				return false
			}
			switch {
			case m[1] == "<" && got >= n, m[1] == ">" && got <= n, m[1] == "=" && got != n:
				return false
			}
			continue
		}
		if cells[i] != w {
			return false
		}
	}
	return true
}

// TestListAndSelect: -list names every scenario once, one per line within
// 100 columns, and Select takes names in the order given and refuses an
// unknown one.
func TestListAndSelect(t *testing.T) {
	var out bytes.Buffer
	if err := demo.List(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	all := demo.Scenarios()
	if len(lines) != len(all) {
		t.Fatalf("List printed %d lines; want one per scenario (%d):\n%s", len(lines), len(all), out.String())
	}
	for i, sc := range all {
		if !strings.HasPrefix(lines[i], sc.Name+" ") || !strings.HasSuffix(lines[i], sc.Shows) {
			t.Errorf("List line %d = %q; want %s, then what it shows", i+1, lines[i], sc.Name)
		}
		if w := demo.VisibleWidth(lines[i]); w > demo.Width {
			t.Errorf("List line %d is %d columns wide", i+1, w)
		}
	}
	got, err := demo.Select("batch, sale")
	if err != nil || len(got) != 2 || got[0].Name != "batch" || got[1].Name != "sale" {
		t.Errorf("Select(\"batch, sale\") = %v, %v; want batch then sale", got, err)
	}
	if got, err := demo.Select(""); err != nil || len(got) != len(all) {
		t.Errorf("Select(\"\") = %d scenarios, %v; want all %d", len(got), err, len(all))
	}
	if _, err := demo.Select("sale,nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Select(\"sale,nope\") = %v; want an error naming nope", err)
	}
}

// TestOrdersPaidByCallback: with SECKILL_PAYMENT_SECRET the workshop's
// orders scenario pays through the payment provider's signed callback,
// and its rows hold as without.
func TestOrdersPaidByCallback(t *testing.T) {
	if testing.Short() {
		t.Skip("plays the orders scenario")
	}
	env := map[string]string{"SECKILL_PAYMENT_SECRET": "whsec-workshop"}
	logs := logFile(t)
	l, err := lab.NewLab(func(k string) string { return env[k] }, logs)
	if err != nil {
		t.Fatal(err)
	}
	orders, err := demo.Select("orders")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	results, err := demo.Run(t.Context(), l, orders, demo.Terminal{Out: &out})
	if err != nil || len(results) != 1 || !results[0].OK() {
		t.Fatalf("Run = %v, %+v; want the orders scenario OK\n%s", err, results, out.String())
	}
	for key, w := range wantRows["orders"] {
		row, ok := results[0].Row(key)
		if !ok || !cellsMatch(row.Cells, w.cells) {
			t.Errorf("orders %q = %q; want %q", key, row.Cells, w.cells)
		}
	}
	b, err := os.ReadFile(logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "order paid by the provider's callback"); n == 0 {
		t.Errorf("the log tells of no order paid by the callback; want every payment paid so")
	}
}
