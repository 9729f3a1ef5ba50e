package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server of the scenario's own that writes every
// command to its append-only file and syncs it before it answers.
type RedisServer struct {
	Addr, dir string
	ctx       context.Context
	cmd       *exec.Cmd
}

// StartRedisServer starts one on a free port, in a directory of its own;
// exec.ErrNotFound when none is installed.
func StartRedisServer(ctx context.Context) (*RedisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "seckill-demo-redis-")
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("lab: %w", err), os.RemoveAll(dir))
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return nil, errors.Join(fmt.Errorf("lab: %w", err), os.RemoveAll(dir))
	}
	r := &RedisServer{Addr: addr, dir: dir, ctx: ctx}
	if err := r.start(); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return r, nil
}

func (r *RedisServer) start() error {
	_, port, _ := net.SplitHostPort(r.Addr)
	r.cmd = exec.CommandContext(r.ctx, "redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--logfile", filepath.Join(r.dir, "redis.log"))
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("lab: start redis-server: %w", err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c.Ping(r.ctx).Err() == nil {
			return nil
		}
	}
	return fmt.Errorf("lab: redis-server on %s did not answer within 5 s", r.Addr)
}

// kill stops the process with SIGKILL: nothing is flushed on the way out.
func (r *RedisServer) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill() // it may have exited already
		_ = r.cmd.Wait()         // a killed process's exit status is not news
	}
}

// Restart kills it and starts it again from its append-only file.
func (r *RedisServer) Restart() error {
	r.kill()
	return r.start()
}

// Stop kills it and removes its directory.
func (r *RedisServer) Stop() error {
	r.kill()
	return os.RemoveAll(r.dir)
}
