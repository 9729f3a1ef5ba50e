package apptest

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/seckill/seckill/internal/app"
)

// AnotherKillable starts a second instance of the same sale, as Another
// does, and returns with it a function that kills it at once: its listener
// and every connection closed, requests in flight cut, as when the process
// dies. Killing it twice is harmless; it is killed when t ends.
func (in *Instance) AnotherKillable(t testing.TB) (*Instance, func()) {
	t.Helper()
	other := *in
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("apptest: listen: %v", err)
	}
	other.URL = "http://" + ln.Addr().String()
	srv := app.NewServer(t.Context(), other.Config, other.Stores, quietLog(), app.Options{KeyPrefix: other.keyPrefix})
	done := make(chan error, 1)
	go func() { done <- srv.HTTP.Serve(ln) }()
	var once sync.Once
	kill := func() {
		once.Do(func() {
			if err := srv.HTTP.Close(); err != nil {
				t.Errorf("apptest: kill: %v", err)
			}
			if err := <-done; !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("apptest: serve: %v", err)
			}
			if err := srv.Close(); err != nil {
				t.Errorf("apptest: close: %v", err)
			}
		})
	}
	t.Cleanup(kill)
	return &other, kill
}
