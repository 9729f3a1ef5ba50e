package lab

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/app"
)

// Lab holds what every scenario shares: the configuration and where the
// instances' logs go.
type Lab struct {
	cfg config.Config
	log *slog.Logger
}

// NewLab reads the configuration as `seckill demo` does (the strategy
// override on unless SECKILL_STRATEGY_OVERRIDE says otherwise, which the
// demo cannot run with). The instances log to logs, at info level.
func NewLab(getenv func(string) string, logs io.Writer) (*Lab, error) {
	cfg, err := app.LoadConfig(getenv, true)
	if err != nil {
		return nil, err
	}
	if !cfg.StrategyOverride {
		return nil, errors.New("lab: SECKILL_STRATEGY_OVERRIDE=false: the demo chooses each purchase's strategy, unset it")
	}
	return &Lab{cfg: cfg, log: slog.New(slog.NewTextHandler(logs, nil))}, nil
}

// Stores says which stores the scenarios run on, in a few words.
func (l *Lab) Stores() string {
	db, redis := "the embedded SQLite", "three embedded Redis nodes"
	if l.cfg.MySQLDSN != "" {
		db = "MySQL (SECKILL_MYSQL_DSN)"
	}
	if len(l.cfg.RedisAddrs) > 0 {
		redis = "SECKILL_REDIS_ADDRS (embedded nodes for the node faults)"
	}
	return db + " and " + redis
}

// Observer receives a scenario's events as they happen.
type Observer interface {
	Observe(Event)
}

// Event is one thing that happened while a scenario ran.
type Event struct {
	// Kind is "start", "note", "tick", "result" or "error".
	Kind string `json:"kind"`
	// At is the time since the scenario started, in seconds.
	At       float64    `json:"at"`
	Scenario *Info      `json:"scenario,omitempty"` // start
	Text     string     `json:"text,omitempty"`     // note, error
	Series   []Snapshot `json:"series,omitempty"`   // tick
	Result   *Result    `json:"result,omitempty"`   // result
}

// Info describes a scenario.
type Info struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Shows string `json:"shows"`
	Story string `json:"story"`
}

// Info describes sc.
func (sc Scenario) Info() *Info {
	return &Info{Name: sc.Name, Title: sc.Title, Shows: sc.Shows, Story: sc.Story}
}

// Snapshot is one series as it stood at a tick.
type Snapshot struct {
	ID      string `json:"id"`
	Label   string `json:"label"`
	Product int64  `json:"product"`
	Initial int64  `json:"initial"`
	// Stock is the product's stock as last read; Audited says it is the
	// audit's, read after the series' sale ended.
	Stock   int64 `json:"stock"`
	Audited bool  `json:"audited"`
	// AuditURL is the product's audit on the instance that sold it, read
	// through the workshop page (the audit is an admin's: the page holds
	// the token, the browser does not).
	AuditURL string `json:"audit_url"`
	// Answers counts the answers so far by status and code, e.g.
	// "201", "409 sold_out".
	Answers map[string]int `json:"answers"`
	// Waiting is how many purchases are in flight, waiting for their
	// lock or their turn; Longest is the oldest one's wait so far, in ms.
	Waiting int   `json:"waiting"`
	Longest int64 `json:"longest_ms"`
}

// Run plays sc in a world of its own and returns what it found. obs, when
// not nil, receives its events; keep, when true, leaves the world's
// instances running until the returned close is called (the workshop page
// links to their audits), otherwise they are stopped before Run returns.
func (l *Lab) Run(ctx context.Context, sc Scenario, obs Observer, keep bool) (res *Result, kept *World, err error) {
	w, err := l.newWorld(ctx, sc, obs)
	if err != nil {
		return nil, nil, err
	}
	w.emit(Event{Kind: "start", Scenario: sc.Info()})
	stopTicks := w.tick()
	res, err = sc.Run(w)
	stopTicks()
	if err == nil {
		res.Scenario, res.Title = sc.Name, sc.Title
		res.Seconds = time.Since(w.start).Seconds()
		w.emitTick()
		w.emit(Event{Kind: "result", Result: res})
	} else {
		w.emit(Event{Kind: "error", Text: err.Error()})
	}
	if keep && err == nil {
		return res, w, nil
	}
	return res, nil, errors.Join(err, w.Close())
}

// Log is where the instances log, and where a caller logs what the
// scenarios' readers should not see.
func (l *Lab) Log() *slog.Logger { return l.log }
