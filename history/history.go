// Package history reads, writes and checks histories of purchases: every
// purchase attempt a client made, with when it began and ended and what it
// was answered, one JSON object a line, as the contract's `-history` gives
// it. Check proves a history linearizable against one stock counter per
// product, or shows the first violation (see check.go).
package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/seckill/seckill/api"
)

// Line is one line of a history: a stock line or a purchase, in the
// contract's shape (see api.HistoryLine).
type Line = api.HistoryLine

// MaxQuantity is the most units one purchase may ask for (the service's
// bound); it also bounds the work of a check.
const MaxQuantity = api.MaxQuantity

// validate says what is wrong with a line that parsed.
func validate(l Line) error {
	switch {
	case l.Product <= 0:
		return errors.New("product must be a positive integer")
	case l.Stock != nil && *l.Stock < 0:
		return errors.New("stock must not be negative")
	case l.Stock != nil:
		return nil
	case l.Cancel() && l.OrderID == nil:
		return errors.New("a cancel needs order_id")
	case l.Quantity <= 0 || l.Quantity > MaxQuantity:
		return fmt.Errorf("quantity must be an integer from 1 to %d", MaxQuantity)
	case l.EndNS < l.StartNS:
		return errors.New("end_ns is before start_ns")
	case l.Status != 0 && (l.Status < 100 || l.Status > 599):
		return fmt.Errorf("status %d is not an HTTP status (or 0)", l.Status)
	case l.Cancel():
		return nil
	case l.Ordered() && (l.RemainingStock == nil || l.OrderID == nil):
		return fmt.Errorf("a %d needs remaining_stock and order_id", l.Status)
	case l.Succeeded() && l.RemainingStock == nil:
		return fmt.Errorf("a %d needs remaining_stock", l.Status)
	}
	return nil
}

// ParseError is a line of a history that cannot be read.
type ParseError struct {
	Line int // from 1
	Err  error
}

func (e *ParseError) Error() string { return fmt.Sprintf("history: line %d: %v", e.Line, e.Err) }
func (e *ParseError) Unwrap() error { return e.Err }

// maxLine bounds one line of a history.
const maxLine = 1 << 20

// Read reads a whole history. A line that does not parse is a *ParseError
// naming it; blank lines are skipped.
func Read(r io.Reader) ([]Line, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var out []Line
	for n := 1; sc.Scan(); n++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var l Line
		if err := json.Unmarshal(text, &l); err != nil {
			return nil, &ParseError{Line: n, Err: err}
		}
		if err := validate(l); err != nil {
			return nil, &ParseError{Line: n, Err: err}
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: read line %d: %w", len(out)+1, err)
	}
	return out, nil
}

// ReadFile reads the history in the file at path.
func ReadFile(path string) ([]Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	return Read(f)
}

// Writer writes lines as they come, from any number of goroutines.
type Writer struct {
	mu  sync.Mutex
	w   *bufio.Writer
	buf []byte // the line being written
	err error
}

// NewWriter writes lines to w, buffered: Flush at the end.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10)}
}

// Write writes one line. After a failed write it keeps returning that
// error.
func (w *Writer) Write(l Line) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.buf = append(l.AppendJSON(w.buf[:0]), '\n')
		if _, err := w.w.Write(w.buf); err != nil {
			w.err = fmt.Errorf("history: write: %w", err)
		}
	}
	return w.err
}

// Flush writes what is buffered.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("history: flush: %w", err)
		}
	}
	return w.err
}

// WriteFile writes lines to a new file at path.
func WriteFile(path string, lines []Line) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	w := NewWriter(f)
	for _, l := range lines {
		if err := w.Write(l); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}
