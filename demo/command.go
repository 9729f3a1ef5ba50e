package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/redis/go-redis/v9"
	"golang.org/x/term"

	"github.com/seckill/seckill/demo/lab"
)

// usage heads `seckill demo -h`.
const usage = `usage: seckill demo [-list] [-scenario NAME[,NAME]] [-web ADDR] [-log FILE]

Plays the workshop's scenarios against instances of the service started in
this process, on embedded stores (or on SECKILL_MYSQL_DSN and
SECKILL_REDIS_ADDRS), and exits 0 when every safe strategy held and every
unsafe one showed its flaw.

Flags:
`

// Command is `seckill demo ARGS...`: it parses the demo's flags, then plays
// the scenarios in the terminal, lists them, or serves the workshop page.
func Command(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("seckill demo", flag.ContinueOnError)
	fs.SetOutput(stdout)
	list := fs.Bool("list", false, "list the scenarios, one per line: its name, then what it shows")
	only := fs.String("scenario", "", "play only these scenarios (comma-separated names; default: all)")
	web := fs.String("web", "", "serve the workshop page at this address (e.g. 127.0.0.1:8088) instead")
	logPath := fs.String("log", "",
		"where the instances' logs go (default: a new file in the temporary directory)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output(), "\nScenarios:")
		_ = List(fs.Output()) // usage that cannot be printed has nowhere to go
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("demo: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("demo: unexpected argument %q", fs.Arg(0))
	}
	if *list {
		return List(stdout)
	}
	scenarios, err := Select(*only)
	if err != nil {
		return err
	}
	logFile, err := openLog(*logPath)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "The instances' logs: %s\n", logFile.Name())
	defer func() {
		if cerr := logFile.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("demo: close the instances' log %s: %w", logFile.Name(), cerr))
		}
	}()
	// go-redis reports the nodes the demo stops on purpose on its own
	// logger: to the file with the rest.
	redis.SetLogger(fileLog{logFile})
	l, err := lab.NewLab(getenv, logFile)
	if err != nil {
		return err
	}
	if *web != "" {
		return Serve(ctx, l, *web, stdout)
	}
	tty := isTerminal(stdout)
	_, err = Run(ctx, l, scenarios, Terminal{
		Out:    stdout,
		Colour: tty && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb",
		Live:   tty,
	})
	fmt.Fprintf(stdout, "The instances' logs: %s\n", logFile.Name())
	return err
}

// openLog creates the instances' log file: path, or when it is empty a
// file of the run's own in the temporary directory, so that two runs at
// once do not write over each other's.
func openLog(path string) (*os.File, error) {
	if path == "" {
		f, err := os.CreateTemp("", "seckill-demo-*.log")
		if err != nil {
			return nil, fmt.Errorf("demo: the instances' log: %w", err)
		}
		return f, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("demo: -log: %w", err)
	}
	return f, nil
}

// fileLog is go-redis's logger in the demo: lines into the log file.
type fileLog struct{ w io.Writer }

func (l fileLog) Printf(_ context.Context, format string, v ...any) {
	fmt.Fprintf(l.w, "go-redis: "+format+"\n", v...)
}

// isTerminal says w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
