package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/seckill/seckill/internal/app"
)

// serve runs one instance of the service until ctx ends.
func serve(ctx context.Context, getenv func(string) string, stdout io.Writer) (err error) {
	cfg, err := app.LoadConfig(getenv, false)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stdout, nil))
	log.Info("seckill starting", "config", cfg)
	if cfg.AdminTokenGenerated {
		fmt.Fprintf(stdout, "admin token (set SECKILL_ADMIN_TOKEN to choose it): %s\n", cfg.AdminToken)
	}
	st, err := app.OpenStores(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on SECKILL_ADDR %s: %w", cfg.Addr, err)
	}
	srv := app.NewServer(ctx, cfg, st, log, app.Options{})
	log.Info("seckill listening", "url", "http://"+ln.Addr().String())
	return app.Serve(ctx, srv, ln, cfg, log)
}
