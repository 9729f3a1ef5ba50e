package main

import (
	"context"
	"crypto"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/loadtest/driver"
)

// Buyers known by their tokens (SECKILL_BUYER_AUTH=jwt): the hot product on
// an instance under jwt beside one under open, both of their own and
// without the per-user limit. Per algorithm: as fast as it goes with a
// fresh buyer per purchase (its token signed before the run); at a fixed
// rate both sustain, open's run and the algorithm's in a pair (at the same
// rate a hold of the lock serves as many buyers under either, so the CPU
// per answer differs by what a token costs); and as fast as it goes with a
// thousand buyers buying again and again, each with its one token (a
// buyer's retries: the cache of verified tokens), open's run and the
// algorithm's in a pair. Beside each algorithm, the verify of a fresh token
// alone, in this process.

// jwtAlgorithms are the algorithms measured.
func jwtAlgorithms() []string { return []string{"RS256", "ES256", "EdDSA"} }

// jwtRow is one algorithm's runs, open's beside them, and its verify
// alone.
type jwtRow struct {
	alg                string
	fast               row           // a fresh buyer per purchase, as fast as it goes
	atRate, openAtRate row           // the same at jwtResult's rate
	reused, openReused row           // reusedBuyers buyers, each with its one token
	verify             time.Duration // CPU per fresh token verified alone
}

// jwtResult is open's fastest run and each algorithm's runs.
type jwtResult struct {
	rate   float64 // purchases per second of the runs at a fixed rate
	open   row     // open, a fresh buyer per purchase, as fast as it goes
	byAlgo []jwtRow
}

// verifyCount is how many fresh tokens are verified alone per algorithm.
const verifyCount = 2000

// jwtRateShare is the fixed rate's share of open's fastest: well below
// what each algorithm sustains here (0.4x to 0.7x of open's with a fresh
// token per buyer on 2 cores), so that no run at that rate saturates.
const jwtRateShare = 0.25

// reusedBuyers is how many buyers buy again and again in the runs whose
// tokens are reused.
const reusedBuyers = 1000

// presignFactor is how many tokens are signed ahead of a run, over the
// answers open's fastest run gave in as long (its warmup included): enough
// that no token is signed while the run is measured.
const presignFactor = 1.5

// jwtAll measures the hot product under open and under jwt, per
// algorithm, and prints their rows and ratios (bench-sale -jwt).
func (b *bench) jwtAll(ctx context.Context) error {
	fmt.Fprintf(b.out, "bench-sale -jwt: %d CPUs, %s; %d buyers, %v per run\n\n", runtime.NumCPU(), runtime.Version(), b.opts.concurrency, b.opts.duration)
	dsn, dropDB, err := b.database(ctx)
	if err != nil {
		return err
	}
	defer dropDB()
	var f figures
	if f.jwt, err = b.buyersJWT(ctx, dsn, "bench-"+fmt.Sprint(time.Now().UnixNano())); err != nil {
		return err
	}
	if err := b.writeRows(); err != nil {
		return err
	}
	fmt.Fprintln(b.out)
	b.writeJWT(&f)
	return nil
}

// buyersJWT makes a key per algorithm, starts an instance under open and
// one under jwt, runs open's runs and each algorithm's, and adds their
// rows to the table.
func (b *bench) buyersJWT(ctx context.Context, dsn, token string) (jwtResult, error) {
	var res jwtResult
	dir, err := os.MkdirTemp("", "salebench-jwt")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	keys := map[string]crypto.Signer{}
	signers := map[string]*buyer.Signer{}
	for _, alg := range jwtAlgorithms() {
		k, err := buyer.GenerateKey(alg)
		if err != nil {
			return res, err
		}
		s, err := buyer.NewSigner(k, "")
		if err != nil {
			return res, err
		}
		keys[s.KeyID()], signers[alg] = k, s
	}
	set, err := buyer.PublicSet(keys)
	if err != nil {
		return res, err
	}
	jwks := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwks, set, 0o644); err != nil {
		return res, err
	}
	openURL, stopOpen, err := b.startService(ctx, dsn, token, "SECKILL_PER_USER_LIMIT=0")
	if err != nil {
		return res, err
	}
	defer stopOpen()
	jwtURL, stopJWT, err := b.startService(ctx, dsn, token, "SECKILL_PER_USER_LIMIT=0", "SECKILL_BUYER_AUTH=jwt", "SECKILL_BUYER_JWKS="+jwks)
	if err != nil {
		return res, err
	}
	defer stopJWT()

	// The instances' own strategy (redlock), under open as under jwt: the
	// override's parameters would need the admin token in the buyer's
	// header.
	openCfg := b.steady([]string{openURL}, token, "", 0, 0)
	if res.open, err = b.run(ctx, "service redlock, default batch, no user limit: open, a fresh buyer per purchase", openCfg); err != nil {
		return res, err
	}
	b.rows = append(b.rows, res.open)
	res.rate = math.Round(jwtRateShare * res.open.perSecond)
	for _, alg := range jwtAlgorithms() {
		cfg := b.steady([]string{jwtURL}, token, "", 0, 0)
		ahead := int(presignFactor * res.open.perSecond * (cfg.Duration + cfg.Warmup).Seconds())
		cfg.BuyerTokens = &driver.BuyerTokens{Signer: signers[alg], Audience: "seckill", Presign: ahead}
		j, err := b.jwtRuns(ctx, alg, res.rate, openCfg, cfg)
		if err != nil {
			return res, err
		}
		if j.verify, err = verifyAlone(ctx, jwks, signers[alg]); err != nil {
			return res, err
		}
		res.byAlgo = append(res.byAlgo, j)
	}
	return res, nil
}

// jwtRuns runs the hot product under algorithm alg (cfg) as fast as it
// goes; then at rate, open's run (openCfg) and alg's in turn; then with
// reusedBuyers buyers each with its token, open's and alg's in turn.
func (b *bench) jwtRuns(ctx context.Context, alg string, rate float64, openCfg, cfg driver.Config) (jwtRow, error) {
	j := jwtRow{alg: alg}
	var err error
	if j.fast, err = b.run(ctx, "service redlock, default batch, no user limit: jwt "+alg+", a fresh buyer per purchase", cfg); err != nil {
		return j, err
	}
	atRate := func(c driver.Config) driver.Config {
		c.Rates, c.Concurrency = []float64{rate}, 4*c.Concurrency
		if c.BuyerTokens != nil { // as many tokens signed ahead as the rate wants
			t := *c.BuyerTokens
			t.Presign = int(presignFactor * rate * (c.Duration + c.Warmup).Seconds())
			c.BuyerTokens = &t
		}
		return c
	}
	reused := func(c driver.Config) driver.Config {
		c.Buyers = reusedBuyers
		return c
	}
	for _, r := range []struct {
		what string
		cfg  driver.Config
		out  *row
	}{
		{fmt.Sprintf("  open, a fresh buyer per purchase, at %.0f/s", rate), atRate(openCfg), &j.openAtRate},
		{fmt.Sprintf("  jwt %s, a fresh buyer per purchase, at %.0f/s", alg, rate), atRate(cfg), &j.atRate},
		{fmt.Sprintf("  open, %d buyers buying again and again", reusedBuyers), reused(openCfg), &j.openReused},
		{fmt.Sprintf("  jwt %s, %d buyers buying again and again", alg, reusedBuyers), reused(cfg), &j.reused},
	} {
		if *r.out, err = b.run(ctx, r.what, r.cfg); err != nil {
			return j, err
		}
	}
	b.rows = append(b.rows, j.fast, j.openAtRate, j.atRate, j.openReused, j.reused)
	return j, nil
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
	runtime.GC() // the runs' garbage is not this check's
	// This process's CPU, in microseconds, its garbage collection included
	// (the process's /proc ticks are too coarse for a few thousand checks);
	// nothing else in it works meanwhile.
	before, err := ownCPU()
	if err != nil {
		return 0, err
	}
	for _, tok := range toks {
		if _, err := v.Verify(ctx, tok); err != nil {
			return 0, err
		}
	}
	after, err := ownCPU()
	if err != nil {
		return 0, err
	}
	return (after - before) / verifyCount, nil
}

// ownCPU is the CPU, user and system, this process has used.
func ownCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
