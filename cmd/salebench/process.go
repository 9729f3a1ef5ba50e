package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seckill/seckill/client"
)

// pidsOf returns the processes of the services at urls.
func (b *bench) pidsOf(urls []string) []int {
	pids := make([]int, len(urls))
	for i, u := range urls {
		pids[i] = b.pids[u]
	}
	return pids
}

// startService runs the service's binary on a free port against dsn and
// the Redis nodes, with the strategy override on, and waits until it is
// ready. stop ends it with SIGTERM, as an orchestrator would.
func (b *bench) startService(ctx context.Context, dsn, token string, env ...string) (string, func(), error) {
	url, stop, _, err := b.startProcess(ctx, dsn, token, env...)
	return url, stop, err
}

// startProcess is startService that also returns the process's ID.
func (b *bench) startProcess(ctx context.Context, dsn, token string, env ...string) (string, func(), int, error) {
	addr, err := freeAddr()
	if err != nil {
		return "", nil, 0, err
	}
	cmd := exec.Command(b.opts.service)
	cmd.Env = append(os.Environ(),
		"SECKILL_ADDR="+addr,
		"SECKILL_MYSQL_DSN="+dsn,
		"SECKILL_REDIS_ADDRS="+b.opts.redisAddrs,
		"SECKILL_ADMIN_TOKEN="+token,
		"SECKILL_STRATEGY_OVERRIDE=true",
	)
	cmd.Env = append(cmd.Env, env...)
	url := "http://" + addr
	stop, err := launch(ctx, cmd, url)
	if err != nil {
		return "", nil, 0, err
	}
	b.pids[url] = cmd.Process.Pid
	return url, stop, cmd.Process.Pid, nil
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// launch starts cmd, a server that answers GET /healthz at url, and waits
// until it does. stop ends it with SIGTERM, as an orchestrator would, and
// kills it 30 s later.
func launch(ctx context.Context, cmd *exec.Cmd, url string) (stop func(), err error) {
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // it may have exited already: Wait says so
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill() // past its drain: what Wait reports is not news
			<-done
		}
	}
	c := &client.Client{BaseURL: url, CallTimeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); c.Healthz(ctx) != nil; {
		select {
		case err := <-done:
			return nil, fmt.Errorf("%s exited: %v\n%s", cmd.Path, err, logs.String())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return nil, fmt.Errorf("%s did not answer /healthz within 30s\n%s", cmd.Path, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return stop, nil
}

// residentBytes reads a process's resident set size from /proc.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("the service's memory: %w", err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("the service's memory: VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("the service's memory: no VmRSS in /proc/%d/status", pid)
}
