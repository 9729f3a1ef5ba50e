// Command seckill is a flash-sale service that shows, measures and teaches
// how a distributed lock keeps stock from going negative when thousands of
// buyers hit one product at once.
//
//	seckill        serve the HTTP API (configuration from SECKILL_* variables)
//	seckill demo   play the workshop's scenarios, every lock's failure on demand
//	               (-list, -scenario NAME, -web ADDR for the projector page)
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "seckill:", err)
		os.Exit(1)
	}
}

// printUsage prints what -h and --help print: the commands, and the
// variables config.Load reads, in its order.
func printUsage(w io.Writer) error {
	var names []string
	if _, err := config.Load(func(k string) string {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
		return ""
	}, false); err != nil {
		return err
	}
	var vars strings.Builder
	line := 0
	for _, n := range names {
		if line > 0 && line+len(n) > 88 {
			vars.WriteString("\n")
			line = 0
		}
		vars.WriteString("  " + n)
		line += len(n) + 2
	}
	_, err := fmt.Fprintf(w, `usage: seckill [demo [flags]]

  seckill          serve the HTTP API (on 127.0.0.1:8080 unless SECKILL_ADDR says otherwise)
  seckill demo     play the workshop's scenarios, every lock's failure on demand;
                   seckill demo -h lists its flags and scenarios
  seckill -h       print this

The service reads its settings from the environment (each default and meaning:
docs/operating.md, Configuration); with SECKILL_MYSQL_DSN and SECKILL_REDIS_ADDRS unset
it runs on embedded stores:
%s
`, vars.String())
	return err
}

// run is the whole program: it returns when ctx ends (after a graceful
// shutdown) or when something fails.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		return serve(ctx, getenv, stdout)
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help":
		return printUsage(stdout)
	case args[0] == "demo":
		return demo.Command(ctx, args[1:], getenv, stdout)
	}
	return fmt.Errorf("unknown command %q (want no argument, demo, or -h)", args[0])
}
