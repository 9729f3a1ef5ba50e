package service

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/service/failure"
)

// TestScriptErr: a reserve purchase whose call to Redis failed answers
// unavailable only when the call never left (the dial failed, on one node,
// which is never retried); anything else may have run the script, and
// answers outcome_unknown naming the purchase's request ID, as does a
// failed dial on a cluster, whose client retries.
func TestScriptErr(t *testing.T) {
	node := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { node.Close(); cluster.Close() })
	p := Purchase{ProductID: 1, RequestID: "r-9", Strategy: "reserve"}
	dial := fmt.Errorf("reserve: product 1: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	for _, c := range []struct {
		rdb  redis.UniversalClient
		err  error
		want failure.Code
	}{
		{node, dial, failure.CodeUnavailable},
		{node, io.ErrUnexpectedEOF, failure.CodeOutcomeUnknown},
		{node, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}, failure.CodeOutcomeUnknown},
		{cluster, dial, failure.CodeOutcomeUnknown},
	} {
		s := &Seckill{cfg: Config{ReserveRedis: c.rdb}}
		err := s.scriptErr(p, c.err)
		if got := failure.CodeOf(err); got != c.want {
			t.Errorf("scriptErr(%T, %v) = %s; want %s", c.rdb, c.err, got, c.want)
		}
		var e *failure.Error
		if c.want == failure.CodeOutcomeUnknown && (!errors.As(err, &e) || !strings.Contains(e.Message, `"r-9"`)) {
			t.Errorf("scriptErr(%v) = %v; want a message naming request_id r-9", c.err, err)
		}
	}
}
