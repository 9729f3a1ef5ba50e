// Command loadtest fires parallel purchases at one or more running seckill
// instances and checks the stock invariant afterwards through /audit.
//
//	go run ./loadtest -url http://127.0.0.1:8080 -admin-token T -strategy all -stock 100
//
// It prints per strategy its answers, its latency by outcome and its audit,
// within 100 columns (-wide: every column in one table); -json, -csv and
// -report also write every figure, the per-second series, or a page with
// charts to a file (a bare file name goes into -out, loadtest-out by
// default), and it names every file it wrote. Without -product it reuses
// the product named loadtest (-new-product: a new one each time);
// -products N -zipf S spreads the purchases over a catalogue of N. It
// exits 1 when the run fails: a strategy marked safe broke the invariant
// or (with -history) left a history that is not linearizable, a history
// could not be checked, the audit disagrees with the driver's count of
// 201s or fails, a promise (a 202 of reserve) was not kept within -drain,
// no request got through, or an instance cannot be reached or goes down;
// 2 on a usage error. -check FILE exits 1 on a history that
// is not linearizable, 2 on one it cannot read.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/seckill/seckill/history"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

// progressEvery is how often the progress is a new line when stderr is not
// a terminal.
const progressEvery = 5 * time.Second

func main() {
	// The driver makes short-lived garbage at every request and keeps
	// little: collecting less often leaves more CPU to sending.
	debug.SetGCPercent(400)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var usage usageError
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		fmt.Fprintln(os.Stderr, "run with -h for the flags")
		os.Exit(2)
	case errors.As(err, new(unreadableError)):
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// usageError is a command line that cannot run.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// unreadableError is a history -check cannot read.
type unreadableError struct{ err error }

func (e unreadableError) Error() string { return e.err.Error() }
func (e unreadableError) Unwrap() error { return e.err }

// errNotLinearizable is -check's verdict on a history that is not.
var errNotLinearizable = errors.New("the history is not linearizable")

// errFailed is returned after the report was written when it has failures.
var errFailed = errors.New("FAILED")

// options are the flags that are not fields of driver.Config.
type options struct {
	json, csv, report string
	quiet, wide       bool
	// check and checkHTML: -check FILE (and the page of -check-html).
	check, checkHTML string
	// out is the directory of the files given by a bare name.
	out string
	// keygen: -keygen DIR, a buyer-token key and its JWK Set to write.
	keygen string
	// token: -token USER, the buyer whose token to print.
	token string
}

// defaultOut is -out's default: git-ignored at the repository's root.
const defaultOut = "loadtest-out"

// run is the whole command: it parses args, runs the driver, prints the
// table to stdout and the progress to stderr (when it is a terminal).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, opt, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := opt.place(&cfg); err != nil {
		return err
	}
	if opt.keygen != "" {
		return keygen(opt.keygen, stdout)
	}
	if opt.token != "" {
		tok, err := cfg.BuyerTokens.Token(opt.token, time.Now())
		if err != nil {
			return fmt.Errorf("-token: %w", err)
		}
		_, err = fmt.Fprintln(stdout, tok)
		return err
	}
	if opt.check != "" {
		err := checkHistory(opt.check, opt.checkHTML, stdout)
		if opt.checkHTML != "" && (err == nil || errors.Is(err, errNotLinearizable)) {
			err = errors.Join(err, wrote(stdout, opt.checkHTML))
		}
		return err
	}
	if !opt.quiet {
		// On a terminal a line redrawn in place; in a pipe or a log a plain
		// line every few seconds, so that a long run is never silent.
		cfg.Progress = stderr
		if f, ok := stderr.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
			cfg.ProgressEvery = progressEvery
		}
	}
	rep, err := driver.Run(ctx, cfg)
	if cfg.History != "" && rep != nil {
		defer func() {
			// The history is written as the run goes, and closed by Run.
			if werr := wrote(stdout, cfg.History); werr != nil {
				fmt.Fprintln(stderr, "loadtest:", werr)
			}
		}()
	}
	if rep == nil {
		if errors.Is(err, driver.ErrConfig) {
			return usageError{err.Error()}
		}
		return err
	}
	if err != nil && len(rep.Results) == 0 {
		return err
	}
	if werr := opt.write(rep, stdout); werr != nil {
		return errors.Join(err, werr)
	}
	if err != nil {
		return err
	}
	if f := rep.Failures(); len(f) > 0 {
		return fmt.Errorf("%w: %s", errFailed, strings.Join(f, "; "))
	}
	return nil
}

// write prints the report's table to stdout and writes the files that
// -json, -csv and -report name, each named on stdout once written.
func (opt options) write(rep *report.Report, stdout io.Writer) error {
	table := rep.WriteTable
	if opt.wide {
		table = rep.WriteWideTable
	}
	if err := table(stdout); err != nil {
		return err
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{{opt.json, rep.WriteJSON}, {opt.csv, rep.WriteCSV}, {opt.report, rep.WriteHTML}} {
		if out.path == "" {
			continue
		}
		if err := writeFile(out.path, out.write); err != nil {
			return err
		}
		if err := wrote(stdout, out.path); err != nil {
			return err
		}
	}
	return nil
}

// checkHistory is -check: it reads the history at path, prints the verdict
// and, when page is not empty, draws the history there. A history that is
// not linearizable is errNotLinearizable (exit 1); one that cannot be read,
// an unreadableError (exit 2).
func checkHistory(path, page string, stdout io.Writer) error {
	lines, err := history.ReadFile(path)
	if err != nil {
		return unreadableError{err}
	}
	res, err := history.Check(lines)
	if err != nil {
		return unreadableError{err}
	}
	if _, err := fmt.Fprintln(stdout, res); err != nil {
		return err
	}
	if page != "" {
		if err := writeFile(page, func(w io.Writer) error { return res.WriteHTML(w, 30*time.Second) }); err != nil {
			return err
		}
	}
	if !res.Linearizable {
		return errNotLinearizable
	}
	return nil
}

// place puts the files given by a bare name into the -out directory,
// which it creates when one is.
func (o *options) place(cfg *driver.Config) error {
	bare := false
	for _, p := range []*string{&o.json, &o.csv, &o.report, &cfg.History, &o.checkHTML} {
		if *p != "" && !strings.ContainsRune(*p, '/') && !strings.ContainsRune(*p, filepath.Separator) {
			*p = filepath.Join(o.out, *p)
			bare = true
		}
	}
	if !bare {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("the -out directory: %w", err)
	}
	return nil
}

// wrote tells that the file at path was written, by its full path.
func wrote(stdout io.Writer, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path // a path that cannot be made absolute is still a name
	}
	_, err = fmt.Fprintln(stdout, "wrote", abs)
	return err
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}
