package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/seckill/seckill/internal/app"
)

// serve runs one instance of the service until ctx ends.
func serve(ctx context.Context, getenv func(string) string, stdout io.Writer) (err error) {
	cfg, err := app.LoadConfig(getenv, false)
	if err != nil {
		return err
	}
	log := app.NewLogger(stdout, cfg.LogFormat)
	log.Info("seckill starting", "version", app.Version(), "config", cfg)
	if cfg.AdminTokenGenerated {
		// Once, on a line of its own (a record of its own in JSON).
		const msg = "admin token (set SECKILL_ADMIN_TOKEN to choose it)"
		if cfg.LogFormat == "json" {
			log.Warn(msg, "admin_token", cfg.AdminToken)
		} else {
			fmt.Fprintf(stdout, "%s: %s\n", msg, cfg.AdminToken)
		}
	}
	buyers, err := app.OpenBuyers(ctx, cfg, log)
	if err != nil {
		return err
	}
	st, err := app.OpenStores(ctx, cfg, log)
	if err != nil {
		return err
	}
	app.WarnEmbedded(log, cfg.MySQLDSN == "", len(cfg.RedisAddrs) == 0)
	defer func() { err = errors.Join(err, st.Close()) }()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on SECKILL_ADDR %s: %w", cfg.Addr, err)
	}
	srv := app.NewServer(ctx, cfg, st, log, app.Options{Buyers: buyers})
	log.Info("seckill listening", "url", "http://"+ln.Addr().String())
	return app.Serve(ctx, srv, ln, cfg, log)
}
