package main

import (
	"context"
	"errors"
	"io"
)

// demo runs a sale against every strategy; it comes with the embedded stores.
func demo(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return errors.New("demo: not built yet")
}
