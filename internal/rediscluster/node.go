package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/childproc"
)

// Node is one redis-server process of a cluster.
type Node struct {
	Addr string
	port string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Running says the process is there (not killed; it may be frozen).
func (n *Node) Running() bool { return n.cmd != nil }

// PID is the process's ID, 0 when it is not running.
func (n *Node) PID() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// start starts the process and waits until it answers PING.
func (n *Node) start(ctx context.Context) error {
	n.cmd = exec.Command("redis-server", "--port", n.port, "--bind", "127.0.0.1", "--dir", n.dir,
		"--logfile", filepath.Join(n.dir, "redis.log"), "--save", "", "--appendonly", "no",
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
	childproc.DieWithParent(n.cmd)
	if err := n.cmd.Start(); err != nil {
		n.cmd = nil
		return fmt.Errorf("rediscluster: start redis-server on %s: %w", n.Addr, err)
	}
	done := make(chan struct{})
	n.done = done
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait() // the exit status of a killed process is not news
		close(done)
	}(n.cmd)
	c := n.client()
	defer c.Close()
	err := until(ctx, 5*time.Second, func() error {
		select {
		case <-done:
			// It exited (its port or its bus port taken meanwhile): a PING
			// answered now would be someone else's.
			return errExited
		default:
		}
		return c.Ping(ctx).Err()
	})
	if err != nil {
		n.Kill()
		return fmt.Errorf("rediscluster: redis-server on %s did not answer: %w", n.Addr, err)
	}
	return nil
}

// errExited says a node's process ended while it was awaited.
var errExited = errors.New("the process exited")

// client is a plain client of this node alone.
func (n *Node) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 3 * time.Second})
}

// Kill kills the process (SIGKILL: nothing is flushed on the way out), a
// frozen one too, and waits until it is gone.
func (n *Node) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Kill() // it may have exited already: done says so
	<-n.done
	n.cmd = nil
}

// Freeze stops the process (SIGSTOP), as a frozen VM would: its
// connections stay open and nothing answers. Thaw lets it go on.
func (n *Node) Freeze() error { return n.signal(syscall.SIGSTOP) }

// Thaw lets a frozen process go on (SIGCONT).
func (n *Node) Thaw() error { return n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) error {
	if n.cmd == nil || n.cmd.Process == nil {
		return fmt.Errorf("rediscluster: %s is not running", n.Addr)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("rediscluster: signal %v to %s: %w", sig, n.Addr, err)
	}
	return nil
}

// startNode starts one node on a free port, trying another port a few
// times when the one found is taken meanwhile.
func startNode(ctx context.Context, dir string) (*Node, error) {
	var err error
	for range 10 {
		var port string
		if port, err = freePort(); err != nil {
			return nil, err
		}
		n := &Node{Addr: net.JoinHostPort("127.0.0.1", port), port: port, dir: dir}
		if err = os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("rediscluster: %w", err)
		}
		if err = n.start(ctx); err == nil {
			return n, nil
		}
	}
	return nil, err
}

// waitReady waits until the node says the cluster is ok and, a replica,
// that it has synced with its master (so that WAIT counts it).
func (n *Node) waitReady(ctx context.Context) error {
	c := n.client()
	defer c.Close()
	var info string
	err := until(ctx, 30*time.Second, func() error {
		var err error
		if info, err = c.ClusterInfo(ctx).Result(); err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return errors.New("the cluster is not ok")
		}
		if info, err = c.Info(ctx, "replication").Result(); err != nil {
			return err
		}
		if strings.Contains(info, "role:master") || synced(info) {
			return nil
		}
		return errors.New("a replica not synced")
	})
	if err != nil {
		return fmt.Errorf("rediscluster: node %s: %w\n%s", n.Addr, err, info)
	}
	return nil
}

// synced says INFO replication is a replica's whose link to its master is
// up and whose sync is done.
func synced(info string) bool {
	return strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") &&
		strings.Contains(info, "master_sync_in_progress:0")
}

// freePort returns a port for a node: free, and its cluster bus port (the
// port + 10000) free too, both below the kernel's range of ports for
// outgoing connections (ip_local_port_range), where no test's or program's
// ":0" listener and no outgoing connection is given one meanwhile.
func freePort() (string, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	if low < 21000 {
		return "", fmt.Errorf("rediscluster: ip_local_port_range starts at %d: no room below it for a port and its bus port", low)
	}
	for range 200 {
		p := 10000 + rand.IntN(low-20000)
		if free(p) && free(p+10000) {
			return strconv.Itoa(p), nil
		}
	}
	return "", errors.New("rediscluster: no free port and bus port found below the outgoing range")
}

// free says nothing listens on port p of the loopback address now.
func free(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	return l.Close() == nil
}
