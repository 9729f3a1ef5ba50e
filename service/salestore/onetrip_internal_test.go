package salestore

import (
	"testing"
	"time"
)

// TestGroupDeadlineIsTheLatest: a group of one-trip purchases is bounded
// by the latest of their deadlines, not by the one buyer in the most
// hurry (issue 47, bug 5).
func TestGroupDeadlineIsTheLatest(t *testing.T) {
	now := time.Now()
	group := []*tripRequest{{deadline: now.Add(10 * time.Millisecond)}, {deadline: now.Add(time.Second)}, {deadline: now.Add(100 * time.Millisecond)}}
	if got, want := groupDeadline(group), now.Add(time.Second); !got.Equal(want) {
		t.Errorf("groupDeadline = %v from now; want %v", got.Sub(now), want.Sub(now))
	}
}
