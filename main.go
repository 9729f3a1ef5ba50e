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
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "seckill:", err)
		os.Exit(1)
	}
}

// run is the whole program: it returns when ctx ends (after a graceful
// shutdown) or when something fails.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		return serve(ctx, getenv, stdout)
	case args[0] == "demo":
		return runDemo(ctx, args[1:], getenv, stdout)
	}
	return fmt.Errorf("unknown command %q (want no argument, or demo)", args[0])
}
