package testenv

import (
	"testing"
	"time"
)

// Eventually waits until cond holds, checking it every few milliseconds,
// and fails t (naming what it waited for) when timeout passes first. A
// test waits on a condition this way, never on a fixed sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("waited %v for %s", timeout, what)
	}
}

// Until waits as Eventually does, but says whether cond held before
// timeout passed instead of failing: for a test that has more to report
// than what it waited for (what it saw last, a process's output), or that
// must stop something first.
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
	return true
}
