package crashloop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/crashloopguard/crashloop/internal/rolling"
	"github.com/crashloopguard/crashloop/internal/stamp"
)

// SnapshotVersion is the version of the snapshot documents this package
// writes and the only one it restores. A restored object, with the same
// configuration, decides exactly as the one that took the snapshot would
// have; docs/snapshot.md describes each document.
const SnapshotVersion = 1

// maxSnapshotSkew is how far after the restoring object's now a time in a
// snapshot may lie: times beyond it are rejected as corrupt (a restored
// window whose events lie in the future would not age). It allows for a
// clock that was stepped back a little since the snapshot was taken.
const maxSnapshotSkew = time.Hour

// ErrBadSnapshot is matched (errors.Is) by every error Restore returns for
// a document it cannot restore; the error's text says what is wrong and
// where, e.g. `crashloop: bad snapshot: respawn_budget.keys["a"].respawns:
// 4 events, more than the limit of 3`.
var ErrBadSnapshot = errors.New("crashloop: bad snapshot")

// Kinds of snapshot documents.
const (
	kindBudget     = "respawn_budget"
	kindChain      = "chain_detector"
	kindGuard      = "restart_loop_guard"
	kindFleet      = "fleet_supervision_policy"
	kindSupervisor = "supervisor"
)

func badSnapshot(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadSnapshot}, args...)...)
}

// takeSnapshot is the skeleton of every Snapshot. Under mu, take copies
// the object's state (sharing no memory with it) and the writer gets a copy
// of its timebase tb; then, with no lock held, write turns the copy into
// the document, so that formatting a large snapshot, or a park's
// LastError.Error (the application's code), does not hold up the object.
// It fails only for a time that cannot be written and read back.
func takeSnapshot[S any](mu *sync.Mutex, tb *timebase, take func() S, write func(*writer, S) any) ([]byte, error) {
	mu.Lock()
	st := take()
	w := &writer{tb: *tb}
	mu.Unlock()
	doc := write(w, st)
	if w.err != nil {
		return nil, w.err
	}
	return json.MarshalIndent(doc, "", "  ")
}

// restoreSnapshot is the skeleton of every RestoreAt. It decodes data, a
// document of kind, strictly; read checks the document and builds the
// state it holds, at now, against a copy of the timebase tb taken under mu,
// with no lock held, and returns that state and the latest offset the
// document holds on tb. Then, under mu, install puts the state in place and
// tb's latest time is raised to that offset. A document read refuses, or an
// install that fails, leaves the object unchanged.
func restoreSnapshot[D, S any](data []byte, kind string, now time.Time, mu *sync.Mutex, tb *timebase,
	read func(doc *D, tb *timebase, now time.Time) (S, int64, error), install func(S) error) error {
	var doc D
	if err := decodeSnapshot(data, kind, &doc); err != nil {
		return err
	}
	mu.Lock()
	base := *tb
	mu.Unlock()
	st, latest, err := read(&doc, &base, now)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if err := install(st); err != nil {
		return err
	}
	tb.Raise(latest)
	return nil
}

// Writing.

// writer turns the times of one object into text and keeps the first error.
// It runs with no lock held (see takeSnapshot).
type writer struct {
	tb     timebase // a copy, taken with the state: high is the latest time used then
	err    error
	events bool // whether at wrote an event time
}

// wall writes a clock reading.
func (w *writer) wall(t time.Time) string {
	s, err := stamp.Format(t)
	if err != nil && w.err == nil {
		w.err = err
	}
	return s
}

// at writes the time of an event, an offset of the object's timebase, as a
// wall-clock time.
func (w *writer) at(off int64) string {
	w.events = true
	return w.wall(w.tb.Wall(off))
}

// times writes the events of a window (nil when empty).
func (w *writer) times(win *window) []string {
	if win.Len() == 0 {
		return nil
	}
	out := make([]string, 0, win.Len())
	for _, off := range win.AppendTo(nil) {
		out = append(out, w.at(off))
	}
	return out
}

// latest writes the latest time the object used, or "" if it read no time.
// Call it after the events: a reading so early that its offset saturated
// leaves high at its initial math.MinInt64, and the events then need it
// written all the same.
func (w *writer) latest() string {
	if w.tb.High != math.MinInt64 || w.events {
		return w.wall(w.tb.Wall(w.tb.High))
	}
	return ""
}

// parkDoc is a park as a document holds it.
type parkDoc struct {
	Reason    string  `json:"reason"`
	LastError *string `json:"last_error,omitempty"`
	Attempts  int     `json:"attempts"`
	Since     string  `json:"since"`
}

// park writes a park (nil for none). pe.LastError.Error is the
// application's code: call it with no lock held.
func (w *writer) park(pe *ParkedError) *parkDoc {
	if pe == nil {
		return nil
	}
	return &parkDoc{Reason: pe.Reason, LastError: errorText(pe.LastError), Attempts: pe.Attempts, Since: w.wall(pe.Since)}
}

// errorText returns the text of err, or nil for no error.
func errorText(err error) *string {
	if err == nil {
		return nil
	}
	s := errtext.Text(err)
	return &s
}

// Reading. A reader walks the keys of a document in sorted order, so that
// the first error found in a document is always the same one.

// decodeSnapshot parses a whole document of kind into v, strictly.
func decodeSnapshot(data []byte, kind string, v any) error {
	var h struct {
		Version int    `json:"version"`
		Kind    string `json:"kind"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return badSnapshot("%s: corrupt or truncated document: %v", kind, err)
	}
	if err := checkHeader(h.Version, h.Kind, kind, kind); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badSnapshot("%s: %v", kind, err)
	}
	return nil // json.Unmarshal above has refused data after the document
}

func checkHeader(version int, kind, want, path string) error {
	if version != SnapshotVersion {
		return badSnapshot("%s: unknown version %d (this library reads version %d)", path, version, SnapshotVersion)
	}
	if kind != want {
		return badSnapshot("%s: kind %q, want %q", path, kind, want)
	}
	return nil
}

// reader turns the times of one document back into offsets of the
// restoring object's timebase, checking them as it goes.
type reader struct {
	tb        *timebase
	horizon   time.Time // times after it are in the future
	latest    time.Time // the document's latest reading
	hasLatest bool
	latestOff int64 // latest on tb, or math.MinInt64
}

// newReader reads the latest reading of a document restored at now into an
// object with timebase tb (read under the object's lock by the caller and
// passed as a copy: its high is the latest time the object used). A nil tb
// reads a part that is only checked, on a base of now.
func newReader(tb *timebase, now time.Time, latest, path string) (*reader, error) {
	if tb == nil {
		fresh := rolling.NewTimebase(now)
		tb = &fresh
	}
	if tb.High != math.MinInt64 {
		if seen := tb.Wall(tb.High); seen.After(now) {
			now = seen // time never runs backwards
		}
	}
	r := &reader{tb: tb, horizon: now.Add(maxSnapshotSkew), latestOff: math.MinInt64}
	if latest != "" {
		t, err := r.time(latest, path+".latest")
		if err != nil {
			return nil, err
		}
		r.latest, r.hasLatest, r.latestOff = t, true, r.off(t)
	}
	return r, nil
}

// time reads a wall-clock time, in the location of the timebase's base.
func (r *reader) time(s, field string) (time.Time, error) {
	if s == "" {
		return time.Time{}, badSnapshot("%s: missing time", field)
	}
	t, err := stamp.Parse(s)
	if err != nil {
		return time.Time{}, badSnapshot("%s: %v", field, err)
	}
	if t.After(r.horizon) {
		return time.Time{}, badSnapshot("%s: %s lies in the future (more than %v after now, %s)",
			field, s, maxSnapshotSkew, r.horizon.Add(-maxSnapshotSkew).UTC().Format(time.RFC3339Nano))
	}
	return t.In(r.tb.Base.Location()), nil
}

// event reads the time of an event the object recorded: it cannot lie after
// the latest reading.
func (r *reader) event(s, field string) (time.Time, error) {
	t, err := r.time(s, field)
	if err != nil {
		return t, err
	}
	if !r.hasLatest {
		return t, badSnapshot("%s: %s, but the document has no latest reading", field, s)
	}
	if t.After(r.latest) {
		return t, badSnapshot("%s: %s lies after the latest reading of the document (%q)", field, s, r.latest.UTC().Format(time.RFC3339Nano))
	}
	return t, nil
}

// off returns the offset of t on the timebase.
func (r *reader) off(t time.Time) int64 { return r.tb.Off(t) }

// window reads the events of a window of limit.
func (r *reader) window(times []string, limit int, field string) (window, error) {
	if len(times) > limit || len(times) > rolling.MaxSlots {
		return window{}, badSnapshot("%s: %d events, more than the limit of %d", field, len(times), min(limit, rolling.MaxSlots))
	}
	if len(times) == 0 {
		return window{}, nil
	}
	buf := make([]int64, len(times))
	var prev time.Time
	for i, s := range times {
		t, err := r.event(s, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return window{}, err
		}
		if i > 0 && t.Before(prev) {
			return window{}, badSnapshot("%s[%d]: %s lies before the event ahead of it: events must be oldest first", field, i, s)
		}
		buf[i], prev = r.off(t), t
	}
	return rolling.Of(buf), nil
}

// park reads the park of key (nil for none).
func (r *reader) park(key string, p *parkDoc, field string) (*ParkedError, error) {
	if p == nil {
		return nil, nil
	}
	if p.Reason == "" {
		return nil, badSnapshot("%s.reason: missing: a parked key must say why", field)
	}
	if err := count(p.Attempts, field+".attempts"); err != nil {
		return nil, err
	}
	since, err := r.time(p.Since, field+".since")
	if err != nil {
		return nil, err
	}
	return &ParkedError{Key: key, Reason: p.Reason, LastError: restoreError(p.LastError, p.Reason),
		Attempts: p.Attempts, Since: since}, nil
}

// count checks that a count is not negative.
func count(n int, field string) error {
	if n < 0 {
		return badSnapshot("%s: negative count %d", field, n)
	}
	return nil
}

// restoreError turns a saved error text back into an error (nil for no
// text); the last error of a needs_human park still matches ErrNeedsHuman.
func restoreError(text *string, reason string) error {
	if text == nil {
		return nil
	}
	var sentinel error
	if reason == ReasonNeedsHuman {
		sentinel = ErrNeedsHuman
	}
	return errtext.Restore(*text, sentinel)
}
