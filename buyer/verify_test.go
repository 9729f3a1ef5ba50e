package buyer

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// provider is an identity provider of the test's own: key pairs and the
// JWK Set of their public halves, served over HTTP.
type provider struct {
	mu   sync.Mutex
	keys map[string]crypto.Signer // served, by kid
	srv  *httptest.Server
	hits int
}

func newProvider(t testing.TB) *provider {
	t.Helper()
	p := &provider{keys: map[string]crypto.Signer{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.hits++
		set, err := PublicSet(p.keys)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(set)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// add makes a key of alg, serves its public half and returns its signer.
func (p *provider) add(t testing.TB, alg string) *Signer {
	t.Helper()
	k, err := GenerateKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(k, "")
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.keys[s.KeyID()] = k
	p.mu.Unlock()
	return s
}

func (p *provider) remove(kid string) {
	p.mu.Lock()
	delete(p.keys, kid)
	p.mu.Unlock()
}

func (p *provider) reads() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

const (
	audience = "seckill"
	issuer   = "https://id.example"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// verifying is a provider with a key of each of algs, in order, a clock,
// and a verifier of the provider's set on that clock, made after the keys.
func verifying(t *testing.T, algs ...string) (*provider, *clock, []*Signer, *Verifier) {
	t.Helper()
	p := newProvider(t)
	c := &clock{t: time.Now()}
	signers := make([]*Signer, len(algs))
	for i, alg := range algs {
		signers[i] = p.add(t, alg)
	}
	return p, c, signers, newVerifier(t, p, c)
}

func newVerifier(t *testing.T, p *provider, c *clock) *Verifier {
	t.Helper()
	keys, err := NewKeys(context.Background(), p.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys.now = c.now
	return NewVerifier(keys, audience, issuer, c.now)
}

// claims are valid claims for sub at now.
func claims(sub string, now time.Time) jwt.Claims {
	return jwt.Claims{Subject: sub, Audience: jwt.Audience{audience}, Issuer: issuer,
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(10 * time.Minute))}
}

func sign(t *testing.T, s *Signer, c jwt.Claims) string {
	t.Helper()
	tok, err := s.Token(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// forge builds a compact JWS from a header and claims, signed with sig
// over "header.payload" (nil: an empty signature).
func forge(header map[string]any, c jwt.Claims, sig func([]byte) []byte) string {
	h, _ := json.Marshal(header)
	b, _ := json.Marshal(c)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(b)
	out := in + "."
	if sig != nil {
		out += base64.RawURLEncoding.EncodeToString(sig([]byte(in)))
	}
	return out
}

func TestVerifyGoodTokens(t *testing.T) {
	_, c, signers, v := verifying(t, "RS256", "ES256", "EdDSA")
	for _, s := range signers {
		got, err := v.Verify(context.Background(), sign(t, s, claims("alice", c.now())))
		if err != nil || got.Subject != "alice" {
			t.Errorf("%s: Verify = %+v, %v; want alice", s.Algorithm(), got, err)
		}
	}
}

// TestVerifyRefusesAttacks holds the verifier to every attack a reviewer
// would try: each is refused, for the reason it is.
func TestVerifyRefusesAttacks(t *testing.T) {
	p, c, signers, v := verifying(t, "RS256", "ES256")
	rs, es := signers[0], signers[1]
	now := c.now()
	good := sign(t, rs, claims("alice", now))
	parts := strings.Split(good, ".")

	rsaPub, err := x509.MarshalPKIXPublicKey(p.keys[rs.KeyID()].Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: rsaPub})
	hmacWith := func(key []byte) func([]byte) []byte {
		return func(in []byte) []byte { m := hmac.New(sha256.New, key); m.Write(in); return m.Sum(nil) }
	}
	// An ES256 token signed by a key the provider never published, under
	// the kid of its RSA key.
	rogue, err := GenerateKey("ES256")
	if err != nil {
		t.Fatal(err)
	}
	rogueSigner, err := NewSigner(rogue, rs.KeyID())
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := GenerateKey("RS256")
	if err != nil {
		t.Fatal(err)
	}
	unknownSigner, err := NewSigner(unknown, "")
	if err != nil {
		t.Fatal(err)
	}
	tampered, _ := json.Marshal(claims("mallory", now))
	with := func(f func(*jwt.Claims)) jwt.Claims { cl := claims("alice", now); f(&cl); return cl }

	for _, tc := range []struct {
		name  string
		token string
		want  Reason
	}{
		{"no token", "", ReasonMissing},
		{"garbled", "not.a-jwt", ReasonMalformed},
		{"garbled base64", "!!!.???.***", ReasonMalformed},
		{"alg none", forge(map[string]any{"alg": "none", "kid": rs.KeyID()}, claims("alice", now), nil), ReasonAlgorithm},
		{"HS256 keyed by the public key", forge(map[string]any{"alg": "HS256", "kid": rs.KeyID()}, claims("alice", now), hmacWith(pubPEM)), ReasonAlgorithm},
		{"HS256 keyed by the public key's DER", forge(map[string]any{"alg": "HS256", "kid": rs.KeyID()}, claims("alice", now), hmacWith(rsaPub)), ReasonAlgorithm},
		{"an ES256 key under the RSA key's kid", sign(t, rogueSigner, claims("alice", now)), ReasonAlgorithm},
		{"the EC key's kid, signed by another EC key", func() string {
			s, err := NewSigner(rogue, es.KeyID())
			if err != nil {
				t.Fatal(err)
			}
			return sign(t, s, claims("alice", now))
		}(), ReasonSignature},
		{"unknown kid", sign(t, unknownSigner, claims("alice", now)), ReasonKey},
		{"no kid", forge(map[string]any{"alg": "RS256"}, claims("alice", now), nil), ReasonKey},
		{"tampered payload", parts[0] + "." + base64.RawURLEncoding.EncodeToString(tampered) + "." + parts[2], ReasonSignature},
		{"no signature", parts[0] + "." + parts[1] + ".", ReasonSignature},
		{"exp passed", sign(t, rs, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-2 * time.Minute)) })), ReasonExpired},
		{"no exp", sign(t, rs, with(func(c *jwt.Claims) { c.Expiry = nil })), ReasonExpired},
		{"nbf ahead", sign(t, rs, with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(2 * time.Minute)) })), ReasonEarly},
		{"iat ahead", sign(t, rs, with(func(c *jwt.Claims) { c.IssuedAt = jwt.NewNumericDate(now.Add(2 * time.Minute)) })), ReasonEarly},
		{"wrong aud", sign(t, rs, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"other"} })), ReasonAudience},
		{"no aud", sign(t, rs, with(func(c *jwt.Claims) { c.Audience = nil })), ReasonAudience},
		{"wrong iss", sign(t, rs, with(func(c *jwt.Claims) { c.Issuer = "https://evil.example" })), ReasonIssuer},
		{"empty sub", sign(t, rs, with(func(c *jwt.Claims) { c.Subject = "" })), ReasonSubject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), tc.token)
			if r := ReasonOf(err); r != tc.want {
				t.Errorf("Verify = %+v, %v (reason %q); want refused for %q", got, err, r, tc.want)
			}
		})
	}
}

// TestVerifyLeeway: exp, nbf and iat are checked with a minute of leeway
// for the clocks, not more.
func TestVerifyLeeway(t *testing.T) {
	_, c, signers, v := verifying(t, "RS256")
	rs := signers[0]
	now := c.now()
	cl := claims("alice", now)
	cl.Expiry = jwt.NewNumericDate(now.Add(-30 * time.Second))
	cl.NotBefore = jwt.NewNumericDate(now.Add(30 * time.Second))
	if _, err := v.Verify(context.Background(), sign(t, rs, cl)); err != nil {
		t.Errorf("exp 30 s ago, nbf 30 s ahead: %v; want valid (60 s of leeway)", err)
	}
	past := Leeway + time.Second
	for name, tc := range map[string]struct {
		edit func(*jwt.Claims)
		want Reason
	}{
		"exp 61 s ago":   {func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-past)) }, ReasonExpired},
		"nbf 61 s ahead": {func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(past)) }, ReasonEarly},
		"iat 61 s ahead": {func(c *jwt.Claims) { c.IssuedAt = jwt.NewNumericDate(now.Add(past)) }, ReasonEarly},
	} {
		cl := claims("alice", now)
		tc.edit(&cl)
		if _, err := v.Verify(context.Background(), sign(t, rs, cl)); ReasonOf(err) != tc.want {
			t.Errorf("%s: %v; want refused for %s", name, err, tc.want)
		}
	}
}

// TestKeyReadOutlivesItsCaller: a token of a new kid whose client has hung
// up still has the set read, to the end, for the next buyer.
func TestKeyReadOutlivesItsCaller(t *testing.T) {
	p, c, _, v := verifying(t, "RS256")
	rotated := p.add(t, "EdDSA")
	c.add(MinRefresh)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	tok := sign(t, rotated, claims("alice", c.now()))
	if _, err := v.Verify(gone, tok); err != nil {
		t.Errorf("a new kid, its caller gone: %v; want the set read and the token valid", err)
	}
}

// TestKeyRotation: a key the provider rotates in is read the first time a
// token names it, however soon after the read at start (a provider signs
// with a new key at once); a read for an unknown kid comes at most once per
// MinRefresh; a key removed is refused from the next read.
func TestKeyRotation(t *testing.T) {
	p, c, signers, v := verifying(t, "RS256")
	old := signers[0]
	ctx := context.Background()
	reads := p.reads()

	rotated := p.add(t, "ES256")
	if _, err := v.Verify(ctx, sign(t, rotated, claims("alice", c.now()))); err != nil {
		t.Fatalf("a key rotated in right after the read at start: %v; want valid", err)
	}
	again := p.add(t, "EdDSA")
	if _, err := v.Verify(ctx, sign(t, again, claims("alice", c.now()))); ReasonOf(err) != ReasonKey {
		t.Fatalf("a new key within MinRefresh of the last read for a kid: %v; want unknown_key, the set not read again", err)
	}
	if n := p.reads() - reads; n != 1 {
		t.Fatalf("the set was read %d times for two new kids within MinRefresh; want 1", n)
	}
	c.add(MinRefresh)
	if _, err := v.Verify(ctx, sign(t, again, claims("alice", c.now()))); err != nil {
		t.Fatalf("the new key, MinRefresh after the last read: %v; want valid", err)
	}
	c.add(MinRefresh)
	unknown := p.add(t, "EdDSA")
	p.remove(unknown.KeyID())
	reads = p.reads()
	for range 5 { // a flood of unknown kids reads the set once per MinRefresh
		_, _ = v.Verify(ctx, sign(t, unknown, claims("alice", c.now())))
	}
	if n := p.reads() - reads; n != 1 {
		t.Errorf("reads of the set for a flood of unknown kids: %d; want 1", n)
	}

	p.remove(old.KeyID())
	if err := v.keys.Read(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, sign(t, old, claims("alice", c.now()))); ReasonOf(err) != ReasonKey {
		t.Errorf("a key removed from the set, after a read: %v; want unknown_key", err)
	}
}

func TestKeysRefusesSetsWithoutAUsableKey(t *testing.T) {
	for name, set := range map[string]string{
		"empty":       `{"keys":[]}`,
		"not JSON":    `<html>`,
		"an HMAC key": `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h","alg":"HS256"}]}`,
		"RS256 on an EC key": `{"keys":[{"kty":"EC","crv":"P-256","kid":"e","alg":"RS256",` +
			`"x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`,
		"for encryption": `{"keys":[{"kty":"EC","crv":"P-256","kid":"e","use":"enc",` +
			`"x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`,
	} {
		if _, err := parseSet([]byte(set)); err == nil {
			t.Errorf("%s: parseSet = nil error; want refused", name)
		}
	}
	noKid := `{"keys":[{"kty":"EC","crv":"P-256",` +
		`"x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`
	if _, err := parseSet([]byte(noKid)); err == nil {
		t.Error("a key without kid: parseSet = nil error; want refused (no token can name it)")
	}
	ok := `{"keys":[{"kty":"EC","crv":"P-256","kid":"e",` +
		`"x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`
	if set, err := parseSet([]byte(ok)); err != nil || len(set) != 1 {
		t.Errorf("an EC P-256 key without alg: %v, %v; want kept", set, err)
	}
}

// FuzzVerify: whatever the bytes, Verify refuses them or names the buyer
// the provider signed for; it never names another.
func FuzzVerify(f *testing.F) {
	p := newProvider(f)
	c := &clock{t: time.Now()}
	rs := p.add(f, "RS256")
	ed := p.add(f, "EdDSA")
	keys, err := NewKeys(context.Background(), p.srv.URL, nil)
	if err != nil {
		f.Fatal(err)
	}
	keys.now = c.now
	v := NewVerifier(keys, audience, issuer, c.now)
	for _, s := range []*Signer{rs, ed} {
		tok, err := s.Token(claims("fuzz-buyer", c.now()), nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tok)
	}
	f.Add("")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, token string) {
		got, err := v.Verify(context.Background(), token)
		if err == nil && got.Subject != "fuzz-buyer" {
			t.Fatalf("Verify(%q) named %q", token, got.Subject)
		}
		if err != nil && ReasonOf(err) == "" {
			t.Fatalf("Verify(%q): %v, not a refusal", token, err)
		}
	})
}

// TestKeysRun: the set is read again every period, without a token asking,
// so that a key the provider rotates in is held before its first token,
// and one removed is gone; Run returns when its context ends.
func TestKeysRun(t *testing.T) {
	p := newProvider(t)
	p.add(t, "ES256")
	keys, err := NewKeys(context.Background(), p.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	rotated := p.add(t, "EdDSA")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		keys.Run(ctx, 10*time.Millisecond, func(err error) { t.Errorf("a read failed: %v", err) })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for (*keys.set.Load())[rotated.KeyID()].Key == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the key rotated in is not held 10 s later (the set read %d times)", p.reads())
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.remove(rotated.KeyID())
	for (*keys.set.Load())[rotated.KeyID()].Key != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the key removed is still held 10 s later (the set read %d times)", p.reads())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return 10 s after its context ended")
	}
}

func TestPlainHTTP(t *testing.T) {
	for source, want := range map[string]bool{
		"http://idp.example.com/jwks.json":  true,
		"http://10.0.0.7:4444":              true,
		"https://idp.example.com/jwks.json": false,
		"http://127.0.0.1:4444/jwks.json":   false,
		"http://localhost:4444":             false,
		"http://[::1]:4444":                 false,
		"/etc/seckill/jwks.json":            false,
		"":                                  false,
	} {
		if got := PlainHTTP(source); got != want {
			t.Errorf("PlainHTTP(%q) = %t; want %t", source, got, want)
		}
	}
}
