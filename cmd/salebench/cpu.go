package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/every"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

// The service's CPU per answer: what an engineer sizing a sale multiplies
// by the rate to count cores. A run's CPU is sampled from /proc while it
// goes, and only its measured stretch counts: from the end of the warmup,
// for the run's Elapsed. The setup before it (creating and resetting the
// products, 10,000 for the catalogue) and the audit after it are left out,
// as their answers are.

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux the service runs on).
const clockTicks = 100

// cpuSampleEvery is how often a run's CPU is sampled.
const cpuSampleEvery = 50 * time.Millisecond

// processCPU returns the CPU time, user and system, that process pid has
// used so far.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command's name, in parentheses, may hold spaces: the fields
	// counted from its end are utime and stime, the 14th and 15th.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	var ticks int64
	for _, field := range f[11:13] {
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// cpuSample is the CPU the processes had used at a moment.
type cpuSample struct {
	at  time.Time
	cpu time.Duration
}

// cpuMeter samples the CPU of a run's processes. As the run's progress
// writer it learns when the load began: the driver draws its first
// progress line when the warmup starts.
type cpuMeter struct {
	pids []int

	mu      sync.Mutex
	began   time.Time
	samples []cpuSample
	err     error
}

// Write notes the first progress line's time and drops the line.
func (m *cpuMeter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.began.IsZero() {
		m.began = time.Now()
	}
	return len(p), nil
}

// sample adds the processes' CPU now.
func (m *cpuMeter) sample() {
	var sum time.Duration
	var err error
	for _, pid := range m.pids {
		cpu, perr := processCPU(pid)
		sum += cpu
		err = errors.Join(err, perr)
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = errors.Join(m.err, err)
	m.samples = append(m.samples, cpuSample{at: now, cpu: sum})
}

// at is the CPU used by t, between the samples around it.
func (m *cpuMeter) at(t time.Time) time.Duration {
	s := m.samples
	for i := 1; i < len(s); i++ {
		if !s[i].at.Before(t) {
			span := s[i].at.Sub(s[i-1].at)
			if span <= 0 {
				return s[i].cpu
			}
			frac := float64(t.Sub(s[i-1].at)) / float64(span)
			return s[i-1].cpu + time.Duration(frac*float64(s[i].cpu-s[i-1].cpu))
		}
	}
	return s[len(s)-1].cpu
}

// sampling calls sample now and every cpuSampleEvery until stop, which
// samples a last time.
func sampling(sample func()) (stop func()) {
	sample()
	stopSampling := every.Start(cpuSampleEvery, sample)
	return func() {
		stopSampling()
		sample()
	}
}

// measured runs cfg (one strategy, or one endpoint) against the services
// whose processes are pids and returns its result and the CPU those
// processes spent per answer over its measured stretch.
func measured(ctx context.Context, cfg driver.Config, pids []int) (report.Result, time.Duration, error) {
	res, cpu, err := measuredGroups(ctx, cfg, pids)
	if err != nil {
		return res, 0, err
	}
	return res, cpu[0], nil
}

// measuredGroups is measured for several groups of processes (the
// service's, Redis's): the CPU per answer of each group.
func measuredGroups(ctx context.Context, cfg driver.Config, groups ...[]int) (report.Result, []time.Duration, error) {
	ms := make([]*cpuMeter, len(groups))
	for i, pids := range groups {
		ms[i] = &cpuMeter{pids: pids}
	}
	cfg.Progress = ms[0] // the first learns when the load began
	sampleAll := func() {
		for _, m := range ms {
			m.sample()
		}
	}
	stop := sampling(sampleAll)
	rep, err := driver.Run(ctx, cfg)
	stop()
	if err != nil {
		return report.Result{}, nil, err
	}
	res := rep.Results[0]
	ms[0].mu.Lock()
	began := ms[0].began
	ms[0].mu.Unlock()
	if began.IsZero() {
		return res, nil, errors.New("the service's CPU: the driver drew no progress line, so the run's start is not known")
	}
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		m.mu.Lock()
		err := m.err
		if err == nil && res.Requests > 0 {
			from := began.Add(cfg.Warmup)
			out[i] = (m.at(from.Add(res.Elapsed)) - m.at(from)) / time.Duration(res.Requests)
		}
		m.mu.Unlock()
		if err != nil {
			return res, nil, fmt.Errorf("the CPU of processes %v: %w", m.pids, err)
		}
	}
	return res, out, nil
}
