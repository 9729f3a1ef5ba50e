package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// orDefault is v without its spaces, or def when that leaves nothing.
func orDefault(v, def string) string {
	if v = strings.TrimSpace(v); v == "" {
		return def
	}
	return v
}

// duration reads a Go duration that is not negative.
func duration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("config: %s %q: want a Go duration such as 8s or 500ms", name, v)
	}
	if d < 0 {
		return 0, fmt.Errorf("config: %s %q: must not be negative", name, v)
	}
	return d, nil
}

// positiveDuration reads a Go duration that is more than zero.
func positiveDuration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	d, err := duration(getenv, name, def)
	if err == nil && d == 0 {
		err = fmt.Errorf("config: %s %q: must be positive", name, strings.TrimSpace(getenv(name)))
	}
	return d, err
}

// boolean reads true or false (as strconv.ParseBool does), def when
// unset.
func boolean(getenv func(string) string, name string, def bool) (bool, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("config: %s %q: want true or false", name, v)
	}
	return b, nil
}

// parseAddrs reads comma-separated host:port addresses, each named once;
// empty is none.
func parseAddrs(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var addrs []string
	for _, a := range strings.Split(v, ",") {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", a, err)
		}
		if host == "" {
			return nil, fmt.Errorf("%q: missing host", a)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%q: bad port", a)
		}
		for _, seen := range addrs {
			if seen == a {
				return nil, fmt.Errorf("%q named twice: the nodes must be independent", a)
			}
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// parseReserve reads SECKILL_RESERVE_REDIS: empty, host:port, or
// cluster:host:port[,host:port...].
func parseReserve(v string) (addrs []string, cluster bool, err error) {
	v = strings.TrimSpace(v)
	if rest, ok := strings.CutPrefix(v, "cluster:"); ok {
		if addrs, err = parseAddrs(rest); err == nil && len(addrs) == 0 {
			err = errors.New(`"cluster:" names no seed node: want cluster:host:port[,host:port...]`)
		}
		return addrs, true, err
	}
	if addrs, err = parseAddrs(v); err == nil && len(addrs) > 1 {
		err = fmt.Errorf("%q: one node, host:port, or the seed nodes of a Redis Cluster, cluster:host:port[,host:port...]", v)
	}
	return addrs, false, err
}

// parseAcks reads SECKILL_RESERVE_ACKS: empty or "0" (no replica waited
// for), or N/timeout.
func parseAcks(v string) (int, time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "0" {
		return 0, 0, nil
	}
	n, w, ok := strings.Cut(v, "/")
	replicas, err1 := strconv.Atoi(strings.TrimSpace(n))
	timeout, err2 := time.ParseDuration(strings.TrimSpace(w))
	if !ok || err1 != nil || err2 != nil || replicas < 1 || replicas > 16 || timeout < time.Millisecond || timeout > time.Second {
		return 0, 0, fmt.Errorf("%q: want 0, or N/timeout, e.g. 1/100ms (N replicas from 1 to 16, the timeout from 1ms to 1s)", v)
	}
	return replicas, timeout, nil
}

// parseIPLimit reads SECKILL_IP_LIMIT: "N/window", e.g. "20/1s"; empty is
// no limit.
func parseIPLimit(v string) (int, time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, 0, nil
	}
	n, w, ok := strings.Cut(v, "/")
	limit, err1 := strconv.Atoi(strings.TrimSpace(n))
	window, err2 := time.ParseDuration(strings.TrimSpace(w))
	if !ok || err1 != nil || err2 != nil || limit < 1 || window < time.Millisecond || window > 24*time.Hour {
		return 0, 0, fmt.Errorf("%q: want N/window, e.g. 20/1s (N at least 1, the window from 1ms to 24h)", v)
	}
	return limit, window, nil
}

// parseProxies reads SECKILL_TRUSTED_PROXIES: comma-separated CIDRs (or
// single addresses), IPv4 or IPv6.
func parseProxies(v string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if _, err := netip.ParsePrefix(part); err != nil {
			if _, err := netip.ParseAddr(part); err != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address", part)
			}
		}
		out = append(out, part)
	}
	return out, nil
}
