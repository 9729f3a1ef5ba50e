package buyer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/seckill/seckill/internal/every"
)

// How often the key set is read again: when a token names a kid the set
// does not hold (at most once per MinRefresh), and every Refresh.
const (
	MinRefresh = 5 * time.Second
	Refresh    = 10 * time.Minute
)

// maxSetBytes bounds a JWK Set or discovery document read.
const maxSetBytes = 1 << 20

// ErrNoUsableKey is a key set with no public key of RS256, ES256 or
// EdDSA for signatures.
var ErrNoUsableKey = errors.New("buyer: the JWK Set holds no usable key (RS256, ES256 or EdDSA, public, for signatures)")

// Keys is a JWK Set read from a URL or a file, kept fresh: read again
// every Refresh, and when a token names a kid it does not hold, at most
// once per MinRefresh. Only its usable keys are kept.
type Keys struct {
	source string // an http(s) URL or a file path
	client *http.Client
	now    func() time.Time

	set atomic.Pointer[map[string]jose.JSONWebKey] // by kid

	mu sync.Mutex // one read at a time
	// kidRead is when the last read a token's unknown kid asked for ended:
	// those are the reads MinRefresh spaces (the read at start and those
	// every Refresh spend none of it, so that the first token of a key
	// rotated in is verified, however soon after them it comes).
	kidRead  time.Time
	lastBody []byte // what the last read read
	// reads counts the set's successful reads: a token verified under an
	// earlier one is verified again (its key may be gone).
	reads atomic.Uint64
}

// NewKeys reads the key set at source (an http(s):// URL or a file path)
// and returns it, or why it has no usable key.
func NewKeys(ctx context.Context, source string, client *http.Client) (*Keys, error) {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	k := &Keys{source: source, client: client, now: time.Now}
	if err := k.Read(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// Discover finds the JWK Set of an OpenID Connect issuer: the jwks_uri of
// <issuer>/.well-known/openid-configuration, whose issuer must be the one
// asked.
func Discover(ctx context.Context, issuer string, client *http.Client) (string, error) {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	body, err := get(ctx, client, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration")
	if err != nil {
		return "", fmt.Errorf("buyer: discovery: %w", err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("buyer: discovery: %w", err)
	}
	if doc.Issuer != issuer {
		return "", fmt.Errorf("buyer: discovery: the document's issuer is %q, not %q", doc.Issuer, issuer)
	}
	if !strings.HasPrefix(doc.JWKSURI, "https://") && !strings.HasPrefix(doc.JWKSURI, "http://") {
		return "", fmt.Errorf("buyer: discovery: jwks_uri %q is not an http(s) URL", doc.JWKSURI)
	}
	return doc.JWKSURI, nil
}

// Read reads the key set again and keeps its usable keys. When the set
// cannot be fetched or does not parse, the keys held stay; a set that
// parses and holds no usable key (every key removed) leaves none, and
// ErrNoUsableKey says so.
func (k *Keys) Read(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.readLocked(ctx)
}

// readTimeout bounds one read of the set.
const readTimeout = 10 * time.Second

func (k *Keys) readLocked(ctx context.Context) error {
	// The read is the set's, not the caller's: a client that hangs up does
	// not cut it short (and spend the MinRefresh allowance for nothing).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	var body []byte
	var err error
	if strings.HasPrefix(k.source, "https://") || strings.HasPrefix(k.source, "http://") {
		body, err = get(ctx, k.client, k.source)
	} else {
		body, err = os.ReadFile(k.source)
	}
	if err != nil {
		return fmt.Errorf("buyer: read the JWK Set: %w", err)
	}
	if k.set.Load() != nil && bytes.Equal(body, k.lastBody) {
		return nil // unchanged: the tokens verified under it stay verified
	}
	set, err := parseSet(body)
	switch {
	case errors.Is(err, ErrNoUsableKey) && k.set.Load() != nil:
		// Every key removed: none is held from now on.
		set = map[string]jose.JSONWebKey{}
	case err != nil:
		return err
	}
	k.set.Store(&set)
	k.lastBody = body
	k.reads.Add(1)
	return err
}

// parseSet reads a JWK Set and returns its usable keys by kid.
func parseSet(body []byte) (map[string]jose.JSONWebKey, error) {
	// Keys one at a time: a key this library cannot read (another kty,
	// a private key's extra fields) is skipped, not the whole set.
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("buyer: the JWK Set: %w", err)
	}
	set := map[string]jose.JSONWebKey{}
	for _, r := range raw.Keys {
		var key jose.JSONWebKey
		if key.UnmarshalJSON(r) != nil || !usable(key) {
			continue
		}
		set[key.KeyID] = key
	}
	if len(set) == 0 {
		return nil, ErrNoUsableKey
	}
	return set, nil
}

// usable says key verifies signatures of one of the algorithms buyers'
// tokens may use: public, for signatures, of an algorithm its type is for.
func usable(key jose.JSONWebKey) bool {
	if key.KeyID == "" || !key.Valid() || !key.IsPublic() || (key.Use != "" && key.Use != "sig") {
		return false // a token names its key by kid: one without is never chosen
	}
	alg := algorithmOf(key)
	return alg != "" && (key.Algorithm == "" || key.Algorithm == string(alg))
}

// algorithmOf is the one algorithm a key verifies: RS256 for RSA, ES256
// for EC P-256, EdDSA for Ed25519; "" for any other key.
func algorithmOf(key jose.JSONWebKey) jose.SignatureAlgorithm {
	switch pk := key.Key.(type) {
	case *rsa.PublicKey:
		if pk.N.BitLen() >= 2048 {
			return jose.RS256
		}
	case *ecdsa.PublicKey:
		if pk.Curve == elliptic.P256() {
			return jose.ES256
		}
	case ed25519.PublicKey:
		return jose.EdDSA
	}
	return ""
}

// lookup returns the key of kid, reading the set again first when it does
// not hold it and the last read an unknown kid asked for is MinRefresh
// old; false when the set
// does not hold it then, with the read's error if it failed.
func (k *Keys) lookup(ctx context.Context, kid string) (jose.JSONWebKey, bool, error) {
	if key, ok := (*k.set.Load())[kid]; ok {
		return key, true, nil
	}
	if !k.mu.TryLock() {
		// A read is under way: this token waits for none (a flood of
		// made-up kids piles up nothing); its buyer's retry meets the
		// keys it brings.
		return jose.JSONWebKey{}, false, nil
	}
	defer k.mu.Unlock()
	if key, ok := (*k.set.Load())[kid]; ok { // read by another meanwhile
		return key, true, nil
	}
	if k.now().Sub(k.kidRead) < MinRefresh {
		return jose.JSONWebKey{}, false, nil
	}
	err := k.readLocked(ctx)
	k.kidRead = k.now() // from the read's end: a slow read spends no allowance
	if err != nil && !errors.Is(err, ErrNoUsableKey) {
		return jose.JSONWebKey{}, false, err
	}
	key, ok := (*k.set.Load())[kid]
	return key, ok, nil
}

// Run reads the set every period (Refresh in the program) until ctx ends;
// a failed read keeps the keys held and is told to failed.
func (k *Keys) Run(ctx context.Context, period time.Duration, failed func(error)) {
	every.Run(ctx, period, func(ctx context.Context) {
		if err := k.Read(ctx); err != nil && ctx.Err() == nil {
			failed(err)
		}
	})
}

// PlainHTTP says source is a URL read over plain HTTP from another host
// than this one's loopback: anyone on the path could replace the keys.
func PlainHTTP(source string) bool {
	u, err := url.Parse(source)
	if err != nil || u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	return host != "localhost" && (ip == nil || !ip.IsLoopback())
}

// get reads url's 200 body.
func get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxSetBytes))
}
