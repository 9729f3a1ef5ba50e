package demo

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/demo/lab"
)

//go:embed workshop.html
var workshopHTML string

// workshopPage is the page's template: the scenarios' buttons are written
// in, everything else is drawn by its script from the events of a run.
var workshopPage = template.Must(template.New("workshop").Parse(workshopHTML))

// Workshop is the workshop page and the calls it makes: an http.Handler.
//
//	GET  /                    the page: a button per scenario
//	POST /api/run?scenario=N  plays scenario N and streams its events, one
//	                          JSON Event per line, until its result
//
// One scenario plays at a time (a second run answers 409). The instances
// of the last run stay up until the next run or Close, so that the page's
// links to their audits answer.
type Workshop struct {
	lab *lab.Lab
	ctx context.Context
	mux *http.ServeMux

	mu      sync.Mutex
	running bool
	last    *lab.World // the last run's, kept up for its audits until the next
}

// NewWorkshop returns the page over lab. Runs end when ctx does.
func NewWorkshop(ctx context.Context, l *lab.Lab) *Workshop {
	ws := &Workshop{lab: l, ctx: ctx, mux: http.NewServeMux()}
	ws.mux.HandleFunc("GET /{$}", ws.page)
	ws.mux.HandleFunc("POST /api/run", ws.run)
	ws.mux.HandleFunc("GET /api/audit", ws.audit)
	return ws
}

// audit answers the audit of a product of the last run (?series=ID), read
// from the instance that sold it with the admin token.
func (ws *Workshop) audit(w http.ResponseWriter, r *http.Request) {
	ws.mu.Lock()
	last := ws.last
	ws.mu.Unlock()
	if last == nil {
		http.Error(w, "no run to audit yet", http.StatusNotFound)
		return
	}
	a, err := last.AuditOf(r.Context(), r.URL.Query().Get("series"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(a); err != nil {
		ws.lab.Log().Error("write an audit", "err", err)
	}
}

// ServeHTTP serves the page and its calls to the page's own host only, and
// a run only to the page itself: 403 for a Host that is a name other than
// localhost (DNS rebinding: another site's name made to point here) and for
// a run whose Origin is another site's (any page in the same browser could
// otherwise start runs).
func (ws *Workshop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := ownRequest(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	ws.mux.ServeHTTP(w, r)
}

// ownRequest says why r does not come from the page itself, or nil.
func ownRequest(r *http.Request) error {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host // no port
	}
	host = strings.Trim(host, "[]")
	if net.ParseIP(host) == nil && !strings.EqualFold(host, "localhost") {
		return fmt.Errorf("demo: the workshop page answers on an IP address or localhost, not Host %q", r.Host)
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil // not a browser's cross-site request (those always say)
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host != r.Host {
		return fmt.Errorf("demo: a run is started by the workshop page itself, not by %q", origin)
	}
	return nil
}

// Close stops the last run's instances and closes its stores.
func (ws *Workshop) Close() error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.last == nil {
		return nil
	}
	err := ws.last.Close()
	ws.last = nil
	return err
}

func (ws *Workshop) page(w http.ResponseWriter, _ *http.Request) {
	var infos []*lab.Info
	for _, sc := range Scenarios() {
		infos = append(infos, sc.Info())
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := workshopPage.Execute(w, map[string]any{"Scenarios": infos, "Stores": ws.lab.Stores()}); err != nil {
		ws.lab.Log().Error("workshop page", "err", err)
	}
}

// run plays one scenario and streams its events.
func (ws *Workshop) run(w http.ResponseWriter, r *http.Request) {
	scs, err := Select(r.URL.Query().Get("scenario"))
	if err != nil || len(scs) != 1 {
		http.Error(w, "name one scenario: ?scenario=NAME", http.StatusBadRequest)
		return
	}
	if !ws.begin() {
		http.Error(w, "a scenario is playing; wait for its verdict", http.StatusConflict)
		return
	}
	defer ws.end()

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	events := make(chan lab.Event, 1024)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(ws.ctx, cancel)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, kept, err := ws.lab.Run(ctx, scs[0], eventQueue(events), true)
		if err != nil {
			ws.lab.Log().Error("workshop run", "scenario", scs[0].Name, "err", err)
		}
		ws.mu.Lock()
		ws.last = kept
		ws.mu.Unlock()
	}()
	streamEvents(w, events, done, cancel)
}

// begin marks a run as playing and closes the last run's instances and
// stores; false when a run is playing already.
func (ws *Workshop) begin() bool {
	ws.mu.Lock()
	if ws.running {
		ws.mu.Unlock()
		return false
	}
	ws.running = true
	last := ws.last
	ws.last = nil
	ws.mu.Unlock()
	if last != nil {
		if err := last.Close(); err != nil {
			ws.lab.Log().Error("close the last run", "err", err)
		}
	}
	return true
}

// end marks the run as over.
func (ws *Workshop) end() {
	ws.mu.Lock()
	ws.running = false
	ws.mu.Unlock()
}

// streamEvents writes each event to w as a JSON line as it comes, until
// done, then the events still queued; when the page has gone it cancels
// the run.
func streamEvents(w http.ResponseWriter, events <-chan lab.Event, done <-chan struct{}, cancel func()) {
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	for {
		select {
		case e := <-events:
			if err := enc.Encode(e); err != nil {
				cancel() // the page has gone: end the run
			}
			if flusher != nil {
				flusher.Flush()
			}
		case <-done:
			for {
				select {
				case e := <-events:
					_ = enc.Encode(e) // the last events; a page that has gone misses them
				default:
					if flusher != nil {
						flusher.Flush()
					}
					return
				}
			}
		}
	}
}

// eventQueue is an Observer that hands events to a channel, dropping
// ticks when the reader falls behind (the next tick has the same and
// more).
type eventQueue chan lab.Event

func (s eventQueue) Observe(e lab.Event) {
	if e.Kind == "tick" {
		select {
		case s <- e:
		default:
		}
		return
	}
	s <- e
}

// Serve serves the workshop page at addr until ctx ends, then stops the
// last run's instances.
func Serve(ctx context.Context, l *lab.Lab, addr string, out io.Writer) (err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("demo: -web: %w", err)
	}
	ws := NewWorkshop(ctx, l)
	defer func() { err = errors.Join(err, ws.Close()) }()
	srv := &http.Server{Handler: ws, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(out, "The workshop page: http://%s/ (on %s; Ctrl-C ends it)\n", ln.Addr(), l.Stores())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("demo: -web: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return fmt.Errorf("demo: -web: shutdown: %w", err)
	}
	return nil
}
