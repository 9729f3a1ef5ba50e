package main

import (
	"context"
	"crypto"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/loadtest/driver"
)

// Buyers known by their tokens (SECKILL_BUYER_AUTH=jwt): the hot product on
// an instance of its own, the driver signing a fresh token for every buyer
// (each purchase is a new buyer), once per algorithm; beside each, the
// verify of a fresh token alone, in this process, which the service's CPU
// per answer over open's is held against.

// jwtAlgorithms are the algorithms measured.
func jwtAlgorithms() []string { return []string{"RS256", "ES256", "EdDSA"} }

// jwtRow is one algorithm's run and its verify alone.
type jwtRow struct {
	alg    string
	row    row
	verify time.Duration // CPU per fresh token verified alone
}

// verifyCount is how many fresh tokens are verified alone per algorithm.
const verifyCount = 400

// buyersJWT runs the hot product under jwt once per algorithm.
func (b *bench) buyersJWT(ctx context.Context, dsn, token string) ([]jwtRow, error) {
	dir, err := os.MkdirTemp("", "salebench-jwt")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	keys := map[string]crypto.Signer{}
	signers := map[string]*buyer.Signer{}
	for _, alg := range jwtAlgorithms() {
		k, err := buyer.GenerateKey(alg)
		if err != nil {
			return nil, err
		}
		s, err := buyer.NewSigner(k, "")
		if err != nil {
			return nil, err
		}
		keys[s.KeyID()], signers[alg] = k, s
	}
	set, err := buyer.PublicSet(keys)
	if err != nil {
		return nil, err
	}
	jwks := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwks, set, 0o644); err != nil {
		return nil, err
	}
	url, stop, err := b.startService(ctx, dsn, token, "SECKILL_BUYER_AUTH=jwt", "SECKILL_BUYER_JWKS="+jwks)
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []jwtRow
	for _, alg := range jwtAlgorithms() {
		// The instance's own strategy (redlock): the override's parameters
		// would need the admin token in the buyer's header.
		cfg := b.steady([]string{url}, token, "", 0, 0)
		cfg.BuyerTokens = &driver.BuyerTokens{Signer: signers[alg], Audience: "seckill"}
		rw, err := b.run(ctx, fmt.Sprintf("service redlock, default batch, jwt %s: a fresh token per buyer", alg), cfg)
		if err != nil {
			return nil, err
		}
		v, err := verifyAlone(ctx, jwks, signers[alg])
		if err != nil {
			return nil, err
		}
		out = append(out, jwtRow{alg: alg, row: rw, verify: v})
	}
	return out, nil
}

// verifyAlone is the CPU this process spends verifying a fresh token of
// s's, each once, against the key set in the file jwks.
func verifyAlone(ctx context.Context, jwks string, s *buyer.Signer) (time.Duration, error) {
	keys, err := buyer.NewKeys(ctx, jwks, nil)
	if err != nil {
		return 0, err
	}
	v := buyer.NewVerifier(keys, "seckill", "", nil)
	toks := make([]string, verifyCount)
	now := time.Now()
	for i := range toks {
		if toks[i], err = s.BuyerToken(fmt.Sprintf("alone-%d", i), "seckill", "", now, time.Hour); err != nil {
			return 0, err
		}
	}
	// This thread's own CPU, in microseconds (the process's /proc ticks are
	// too coarse for a few hundred checks).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadCPU()
	if err != nil {
		return 0, err
	}
	for _, tok := range toks {
		if _, err := v.Verify(ctx, tok); err != nil {
			return 0, err
		}
	}
	after, err := threadCPU()
	if err != nil {
		return 0, err
	}
	return (after - before) / verifyCount, nil
}

// threadCPU is the CPU, user and system, the calling thread has used.
func threadCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
