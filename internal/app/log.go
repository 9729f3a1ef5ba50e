package app

import (
	"io"
	"log/slog"

	"github.com/seckill/seckill/controller"
)

// NewLogger returns the program's logger at info level on w: slog's JSON
// handler when format is "json" (SECKILL_LOG_FORMAT), its text handler
// otherwise, wrapped so that whatever is logged with a request's context
// carries the request's attributes (controller.LogHandler).
func NewLogger(w io.Writer, format string) *slog.Logger {
	var h slog.Handler = slog.NewTextHandler(w, nil)
	if format == "json" {
		h = slog.NewJSONHandler(w, nil)
	}
	return slog.New(controller.LogHandler(h))
}
