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
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(wait)
	}
}
