package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-nope"},
		{"-product", "1", "extra"},
		{"-product", "1", "-concurrency", "0"},
		{"-product", "1", "-requests", "0"},
		{"-product", "1", "-rate", "-5"},
		{"-product", "1", "-duration", "5s", "-requests", "10"},
		{"-product", "1", "-duration", "0s"},
		{"-product", "1", "-warmup", "-1s"},
		{"-product", "1", "-batch", "0"},
		{"-product", "1", "-batch", "1001"},
		{"-product", "1", "-pause", "1500us"},
		{"-product", "1", "-rate", "10,x"},
		{"-product", "1", "-rate", "10,0"},
		{"-product", "1", "-rate", "10", "-requests", "5"},
		{"-product", "1", "-fencing", "maybe"},
		{"-product", "1", "-hold", "1500us"},
		{"-product", "1", "-hold", "11s"},
		{"-product", "1", "-quantity", "0"},
		{"-product", "1", "-strategy", "token,,redlock"},
		{"-product", "1", "-strategy", "all,token"},
		{"-product", "1", "-stock", "10"},
		{"-product", "-3"},
		{"-url", " , "},
		{},
		{"-get", "/healthz", "-strategy", "token"},
		{"-product", "1", "-timeout", "0s"},
		{"-product", "1", "-new-product", "-admin-token", "T"},
		{"-products", "5", "-product", "1", "-admin-token", "T"},
		{"-products", "5", "-new-product", "-admin-token", "T"},
		{"-products", "-1", "-admin-token", "T"},
		{"-zipf", "1.5", "-admin-token", "T"},
		{"-products", "5", "-zipf", "-1", "-admin-token", "T"},
		{"-get", "/healthz", "-products", "5"},
		{"-product", "1", "-drain", "0s"},
		{"-get", "/healthz", "-drain", "5s"},
	} {
		_, _, err := parseFlags(args, &bytes.Buffer{})
		var usage usageError
		if !errors.As(err, &usage) {
			t.Errorf("parseFlags(%q) = %v; want a usage error", args, err)
		}
	}
}

func TestParseFlagsAccepts(t *testing.T) {
	cfg, opt, err := parseFlags([]string{
		"-url", "http://a:1, http://b:2", "-admin-token", "T", "-stock", "100",
		"-strategy", "token,redlock", "-rate", "50", "-hold", "3ms", "-fencing", "false",
		"-json", "out.json", "-quiet", "-drain", "5s",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("parseFlags = %v", err)
	}
	switch {
	case len(cfg.URLs) != 2 || cfg.URLs[1] != "http://b:2":
		t.Errorf("URLs = %q", cfg.URLs)
	case len(cfg.Strategies) != 2 || cfg.Strategies[0] != "token":
		t.Errorf("Strategies = %q", cfg.Strategies)
	case len(cfg.Rates) != 1 || cfg.Rates[0] != 50 || cfg.Duration != 10*time.Second || cfg.Requests != 0:
		t.Errorf("open loop: rates %v, duration %s, requests %d; want 50/s for the default 10s", cfg.Rates, cfg.Duration, cfg.Requests)
	case cfg.Hold != 3*time.Millisecond || cfg.Fencing == nil || *cfg.Fencing:
		t.Errorf("hold %s, fencing %v", cfg.Hold, cfg.Fencing)
	case cfg.Drain != 5*time.Second:
		t.Errorf("drain %s; want 5s", cfg.Drain)
	case cfg.Stock != 100 || cfg.AdminToken != "T" || opt.json != "out.json" || !opt.quiet:
		t.Errorf("cfg %+v, options %+v", cfg, opt)
	}

	for args, want := range map[string][]string{
		"-product 1":                 {""},
		"-product 1 -strategy all":   nil,
		"-product 1 -strategy token": {"token"},
	} {
		cfg, _, err := parseFlags(strings.Fields(args), &bytes.Buffer{})
		if err != nil || strings.Join(cfg.Strategies, ",") != strings.Join(want, ",") || (want == nil) != (cfg.Strategies == nil) {
			t.Errorf("parseFlags(%s): Strategies %q, %v; want %q", args, cfg.Strategies, err, want)
		}
	}
}

func TestRunCommand(t *testing.T) {
	in := apptest.Start(t, nil)
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{
		"-url", in.URL, "-admin-token", in.AdminToken, "-strategy", "optimistic,none", "-stock", "5",
		"-requests", "40", "-concurrency", "4", "-hold", "1ms", "-json", jsonPath, "-report", htmlPath,
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run = %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"STRATEGY", "optimistic", "none", "held"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Not a terminal: the progress is plain lines, each run's last one at
	// least, and no line redrawn in place.
	if e := stderr.String(); strings.Contains(e, "\r") || !strings.Contains(e, "optimistic") || !strings.Contains(e, "none") {
		t.Errorf("stderr (not a terminal) = %q; want a plain progress line per run, no carriage return", e)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("-json wrote what does not parse: %v", err)
	}
	if len(rep.Results) != 2 || rep.Results[0].Strategy != "optimistic" || rep.Results[0].Successes != 5 {
		t.Errorf("-json results %+v; want optimistic selling 5, then none", rep.Results)
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("<svg")) || !bytes.Contains(page, []byte("optimistic")) {
		t.Errorf("-report page lacks its charts or its strategies")
	}
}

func TestRunCommandUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"-url", dead, "-product", "1", "-requests", "5"}, &stdout, &stderr)
	var usage usageError
	if err == nil || errors.As(err, &usage) || !strings.Contains(err.Error(), "cannot be reached") {
		t.Errorf("run against %s = %v; want an error (not a usage error) saying it cannot be reached", dead, err)
	}
}

// TestCheckCommand: -check reads a history and says whether it is
// linearizable (exit 0 or 1), or names the line it cannot read (exit 2);
// -check-html draws it.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const stock = `{"product":1,"stock":1,"time_ns":0}` + "\n"
	buy := func(user string, start, end int64, status int, code, extra string) string {
		return fmt.Sprintf(`{"product":1,"user_id":%q,"request_id":"r-%s","quantity":1,"start_ns":%d,"end_ns":%d,"status":%d,"code":%q%s}`+"\n",
			user, user, start, end, status, code, extra)
	}
	good := write("good.jsonl", stock+buy("a", 1, 2, 201, "", `,"remaining_stock":0,"order_id":1`)+buy("b", 3, 4, 409, "sold_out", ""))
	oversold := write("bad.jsonl", stock+buy("a", 1, 2, 201, "", `,"remaining_stock":0,"order_id":1`)+
		buy("b", 3, 4, 201, "", `,"remaining_stock":0,"order_id":2`))
	// Under reserve a 202 took its units as a 201 does: it carries what was
	// left, and no order ID.
	promised := write("promised.jsonl", stock+buy("a", 1, 2, 202, "", `,"remaining_stock":0`)+buy("b", 3, 4, 409, "sold_out", ""))
	overpromised := write("overpromised.jsonl", stock+buy("a", 1, 2, 202, "", `,"remaining_stock":0`)+
		buy("b", 3, 4, 202, "", `,"remaining_stock":0`))
	broken := write("broken.jsonl", stock+"{not json\n")

	var out bytes.Buffer
	page := filepath.Join(dir, "page.html")
	if err := run(t.Context(), []string{"-check", good, "-check-html", page}, &out, io.Discard); err != nil {
		t.Fatalf("-check good = %v\n%s", err, out.String())
	}
	if !strings.HasPrefix(out.String(), "linearizable") {
		t.Errorf("-check good printed %q; want the verdict linearizable", out.String())
	}
	if b, err := os.ReadFile(page); err != nil || !bytes.Contains(b, []byte("<html")) {
		t.Errorf("-check-html wrote %d bytes, %v; want a page", len(b), err)
	}
	out.Reset()
	err := run(t.Context(), []string{"-check", oversold}, &out, io.Discard)
	if !errors.Is(err, errNotLinearizable) || !strings.Contains(out.String(), "not linearizable") || !strings.Contains(out.String(), "r-b") {
		t.Errorf("-check oversold = %v, printed %q; want not linearizable, naming r-b", err, out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"-check", promised}, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "linearizable") {
		t.Errorf("-check promised = %v, printed %q; want linearizable", err, out.String())
	}
	out.Reset()
	err = run(t.Context(), []string{"-check", overpromised}, &out, io.Discard)
	if !errors.Is(err, errNotLinearizable) || !strings.Contains(out.String(), "r-b") {
		t.Errorf("-check overpromised = %v, printed %q; want not linearizable: two 202s took the last unit", err, out.String())
	}
	err = run(t.Context(), []string{"-check", broken}, io.Discard, io.Discard)
	var unreadable unreadableError
	if !errors.As(err, &unreadable) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("-check broken = %v; want an unreadableError naming line 2", err)
	}
	if err := run(t.Context(), []string{"-check-html", page}, io.Discard, io.Discard); !errors.As(err, new(usageError)) {
		t.Errorf("-check-html alone = %v; want a usage error", err)
	}
}

// TestUsageFitsTheColumns: every line of -h, its tabs expanded, fits 100
// columns, and every flag is there.
func TestUsageFitsTheColumns(t *testing.T) {
	var out bytes.Buffer
	if _, _, err := parseFlags([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseFlags(-h) = %v; want flag.ErrHelp", err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		col := 0
		for _, r := range line {
			if r == '\t' {
				col = col/8*8 + 8
			} else {
				col++
			}
		}
		if col > report.TableWidth {
			t.Errorf("-h has a line of %d columns; want at most %d: %q", col, report.TableWidth, line)
		}
	}
	for _, name := range []string{"-out", "-new-product", "-products", "-zipf", "-history", "-check-html", "-drain"} {
		if !strings.Contains(out.String(), "  "+name+" ") && !strings.Contains(out.String(), "  "+name+"\n") {
			t.Errorf("-h does not list %s:\n%s", name, out.String())
		}
	}
}

// TestRunCommandOut: files named without a directory go into -out, one
// with a directory where it says; the run names every file it wrote. Runs
// without -product reuse the product named loadtest; -new-product makes
// another.
func TestRunCommandOut(t *testing.T) {
	in := apptest.Start(t, nil)
	dir := t.TempDir()
	out := filepath.Join(dir, "out", "deeper")
	elsewhere := filepath.Join(dir, "elsewhere.csv")
	runOnce := func(extra ...string) (stdout string, rep report.Report) {
		t.Helper()
		var o, e bytes.Buffer
		args := append([]string{"-url", in.URL, "-admin-token", in.AdminToken, "-strategy", "optimistic",
			"-requests", "20", "-concurrency", "4", "-out", out, "-json", "r.json", "-csv", elsewhere, "-history", "h.jsonl"}, extra...)
		if err := run(t.Context(), args, &o, &e); err != nil {
			t.Fatalf("run(%q) = %v\n%s", extra, err, e.String())
		}
		data, err := os.ReadFile(filepath.Join(out, "r.json"))
		if err != nil {
			t.Fatalf("-json r.json with -out %s: %v", out, err)
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatalf("-json wrote what does not parse: %v", err)
		}
		return o.String(), rep
	}
	stdout, first := runOnce()
	for _, path := range []string{filepath.Join(out, "r.json"), filepath.Join(out, "h.jsonl"), elsewhere} {
		if !strings.Contains(stdout, "wrote "+path+"\n") {
			t.Errorf("the output does not name %s:\n%s", path, stdout)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	_, second := runOnce()
	_, fresh := runOnce("-new-product")
	c := &client.Client{BaseURL: in.URL, AdminToken: in.AdminToken}
	products, err := c.Products(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, p := range products {
		if p.Name == driver.DefaultProductName {
			named++
			if p.ID != first.Config.ProductID || p.InitialStock != driver.DefaultStock {
				t.Errorf("product loadtest %+v; want the first run's (%d) of %d units", p, first.Config.ProductID, driver.DefaultStock)
			}
		}
	}
	switch {
	case named != 1 || len(products) != 2:
		t.Errorf("products %+v; want one named loadtest and the one -new-product made", products)
	case second.Config.ProductID != first.Config.ProductID:
		t.Errorf("second run bought product %d; want the first's %d, by name", second.Config.ProductID, first.Config.ProductID)
	case fresh.Config.ProductID == first.Config.ProductID:
		t.Errorf("-new-product bought product %d, the loadtest one; want a new one", fresh.Config.ProductID)
	}
	for _, rep := range []report.Report{first, second, fresh} {
		if len(rep.Results) != 1 || rep.Results[0].Successes != 20 || rep.Results[0].AuditBefore.Stock != driver.DefaultStock {
			t.Errorf("results %+v; want 20 sold of a stock reset to %d", rep.Results, driver.DefaultStock)
		}
	}
}

// TestKeygenAndToken: -keygen writes a key and its JWK Set; -token prints
// a buyer's token signed with that key, which the set verifies (sub the
// user, aud -buyer-audience, valid for 10 minutes); -token without
// -buyer-key, with a run's flag, with -keygen or with no user ID is a
// usage error.
func TestKeygenAndToken(t *testing.T) {
	dir := t.TempDir()
	if err := run(t.Context(), []string{"-keygen", dir}, io.Discard, io.Discard); err != nil {
		t.Fatalf("-keygen: %v", err)
	}
	key := filepath.Join(dir, "key.pem")
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-buyer-key", key, "-buyer-audience", "shop", "-token", "u-42"}, &out, io.Discard); err != nil {
		t.Fatalf("-token: %v", err)
	}
	keys, err := buyer.NewKeys(t.Context(), filepath.Join(dir, "jwks.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := buyer.NewVerifier(keys, "shop", "", nil).Verify(t.Context(), strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("the printed token does not verify under -keygen's JWK Set: %v", err)
	}
	if life := time.Until(claims.Expiry); claims.Subject != "u-42" || life < 9*time.Minute || life > driver.DefaultBuyerTokenTTL {
		t.Errorf("the token's sub %q, valid for %s more; want u-42's, for about %s", claims.Subject, life, driver.DefaultBuyerTokenTTL)
	}
	for _, args := range [][]string{
		{"-token", "u-1"},
		{"-token", "u-1", "-buyer-key", key, "-concurrency", "5"},
		{"-token", "u-1", "-buyer-key", key, "extra"},
		{"-token", strings.Repeat("u", 65), "-buyer-key", key},
		{"-token", "", "-buyer-key", key},
		{"-keygen", dir, "-token", "u-1"},
		{"-token", "u-1", "-buyer-key", filepath.Join(dir, "jwks.json")},
	} {
		if err := run(t.Context(), args, io.Discard, io.Discard); !errors.As(err, new(usageError)) {
			t.Errorf("run(%q) = %v; want a usage error", args, err)
		}
	}
}
