package main

import (
	"os"
	"testing"
	"time"
)

// TestProcessCPU: the CPU a process has used, read from /proc, grows while
// it works; a process that is not there is an error.
func TestProcessCPU(t *testing.T) {
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatalf("processCPU(self) = %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	now := before
	for now < before+50*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("processCPU(self) went from %v to %v in 10 s of spinning; want 50ms more", before, now)
		}
		for i := 0; i < 1_000_000; i++ {
			_ = i * i
		}
		if now, err = processCPU(os.Getpid()); err != nil {
			t.Fatalf("processCPU(self) = %v", err)
		}
	}
	if _, err := processCPU(1 << 30); err == nil {
		t.Error("processCPU of a pid that is not there = nil error; want one")
	}
}

// TestCPUMeterAt: the CPU at a moment is interpolated between the samples
// around it, and the last sample's past the end.
func TestCPUMeterAt(t *testing.T) {
	t0 := time.Now()
	ms := time.Millisecond
	m := &cpuMeter{samples: []cpuSample{{t0, 0}, {t0.Add(100 * ms), 10 * ms}, {t0.Add(200 * ms), 30 * ms}}}
	for _, c := range []struct {
		at   time.Duration
		want time.Duration
	}{{0, 0}, {50 * ms, 5 * ms}, {100 * ms, 10 * ms}, {150 * ms, 20 * ms}, {300 * ms, 30 * ms}} {
		if got := m.at(t0.Add(c.at)); got != c.want {
			t.Errorf("at(t0+%v) = %v; want %v", c.at, got, c.want)
		}
	}
}
