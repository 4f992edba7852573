package crashloop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SnapshotVersion is the version of the snapshot documents this package
// writes and the only one it restores.
//
// Every guard and the Supervisor export their whole state with
// Snapshot() ([]byte, error) and take it back with Restore(data []byte)
// error (or RestoreAt(data, now), the explicit-time form), so that a
// supervisor that restarts does not forget a crash loop. A restored object,
// created with the same configuration, makes every later decision exactly as
// the object that took the snapshot would have. Snapshot and Restore publish
// no event.
//
// A snapshot is one indented JSON object with "version" (1) and "kind"
// first; the entries of a "keys" object are sorted by key. Every time is a
// wall-clock time in RFC 3339 with nanoseconds (time.RFC3339Nano, in UTC),
// so a restore on a later day ages the windows by the time that really
// passed (a year outside 0 to 9999, which only an explicit time can bring,
// is written expanded as in ISO 8601, "-0001-..." or "10000-...", and read
// back). "latest" is the latest clock reading the object had seen (omitted
// if none; for a RespawnBudget or a ChainDetector, the latest of its
// shards): time never runs backwards under one lock (see mark), and a
// restored object keeps that promise: every shard of it starts there. Windows list their event times oldest first.
// Configuration is not part of a snapshot: restore into an object created
// with the configuration the application uses now. The kinds:
//
//	{"version": 1, "kind": "respawn_budget", "latest": T,
//	 "keys": {KEY: {"respawns": [T...], "prev_backoff": "1.5s",
//	                "parked": {"reason": R, "last_error": "text", "attempts": N, "since": T}}}}
//	{"version": 1, "kind": "chain_detector", "latest": T,
//	 "keys": {KEY: {"incarnation": I, "last": T, "count": N, "escalated": true}}}
//	{"version": 1, "kind": "restart_loop_guard", "latest": T, "restarts": [T...], "tripped": B}
//	{"version": 1, "kind": "fleet_supervision_policy", "latest": T, "restarts": [T...],
//	 "tripped": B, "since": T, "since_clock": T, "failing": N, "total": N}
//	{"version": 1, "kind": "supervisor", "seq": N, "budget": {respawn_budget},
//	 "chain": {chain_detector}, "fleet": {fleet_supervision_policy},
//	 "keys": {KEY: {"state": S, "incarnation": I, "last_error": "text", "since": T,
//	                "guard": {restart_loop_guard}, "hourly": {restart_loop_guard}}}}
//
// Optional parts are omitted when empty: "respawns", "prev_backoff" (the last
// backoff of a Supervisor's curve), "parked", "last_error" (absent: no
// error), "escalated", "since" (only while tripped), "since_clock" (only
// when the clock reading the trip was stamped with, which Status reports
// rearm_at from, differs from since: the clock ran backwards), and a
// Supervisor's "chain", "fleet", "guard" and "hourly" (the guards that are
// off). "seq" numbers the Supervisor's default incarnations. An error is
// kept as its text and restored as errors.New(text), except that the last
// error of a park with reason "needs_human" still matches ErrNeedsHuman.
//
// Restore rejects, with an error matching ErrBadSnapshot that says what is
// wrong and where, and without changing the object: a corrupt or truncated
// document, another version or kind, an unknown field, a window holding
// more events than the restoring object's limit (a budget's MaxRespawns, a
// guard's MaxRestarts, the fleet's RestartsPerHour, a Supervisor's
// HourlyCap) or a chain longer than its MaxChain, times out of order or
// after "latest", a time more than one hour after now (MaxSnapshotSkew: a
// snapshot from the future cannot be trusted), a park without a reason,
// negative counts, failing > total, and an unknown key state. Restore
// replaces the whole state: keys absent from the snapshot are forgotten. A
// Supervisor restores parts for the guards it has on and ignores (after
// checking) the parts of guards it has off; a key that was running, in
// backoff or held when the snapshot was taken is restored as exited.
//
// Inside an object, times are offsets from a base read from its clock when
// it was created; a restore converts them to the restoring object's base.
// The round trip is exact to the nanosecond, except for a time more than
// about 292 years from either base, where an offset saturates (restore into
// an object created at the same clock reading to keep even those exact). A
// state whose clock has since gone back by more than MaxSnapshotSkew
// restores with RestoreAt and a now at or after the latest time it saw.
const SnapshotVersion = 1

// MaxSnapshotSkew is how far after the restoring object's now a time in a
// snapshot may lie: times beyond it are rejected as corrupt (a restored
// window whose events lie in the future would not age). It allows for a
// clock that was stepped back a little since the snapshot was taken.
const MaxSnapshotSkew = time.Hour

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

// The documents, as they are written.

type budgetDoc struct {
	Version int                     `json:"version"`
	Kind    string                  `json:"kind"`
	Latest  string                  `json:"latest,omitempty"`
	Keys    map[string]budgetKeyDoc `json:"keys"`
}

type budgetKeyDoc struct {
	Respawns    []string `json:"respawns,omitempty"`
	PrevBackoff string   `json:"prev_backoff,omitempty"`
	Parked      *parkDoc `json:"parked,omitempty"`
}

type parkDoc struct {
	Reason    string  `json:"reason"`
	LastError *string `json:"last_error,omitempty"`
	Attempts  int     `json:"attempts"`
	Since     string  `json:"since"`
}

type chainDoc struct {
	Version int                    `json:"version"`
	Kind    string                 `json:"kind"`
	Latest  string                 `json:"latest,omitempty"`
	Keys    map[string]chainKeyDoc `json:"keys"`
}

type chainKeyDoc struct {
	Incarnation string `json:"incarnation"`
	Last        string `json:"last"`
	Count       int    `json:"count"`
	Escalated   bool   `json:"escalated,omitempty"`
}

type guardDoc struct {
	Version  int      `json:"version"`
	Kind     string   `json:"kind"`
	Latest   string   `json:"latest,omitempty"`
	Restarts []string `json:"restarts"`
	Tripped  bool     `json:"tripped"`
}

type fleetDoc struct {
	Version    int      `json:"version"`
	Kind       string   `json:"kind"`
	Latest     string   `json:"latest,omitempty"`
	Restarts   []string `json:"restarts"`
	Tripped    bool     `json:"tripped"`
	Since      string   `json:"since,omitempty"`
	SinceClock string   `json:"since_clock,omitempty"`
	Failing    int      `json:"failing"`
	Total      int      `json:"total"`
}

type supervisorDoc struct {
	Version int               `json:"version"`
	Kind    string            `json:"kind"`
	Seq     uint64            `json:"seq"`
	Budget  *budgetDoc        `json:"budget"`
	Chain   *chainDoc         `json:"chain,omitempty"`
	Fleet   *fleetDoc         `json:"fleet,omitempty"`
	Keys    map[string]keyDoc `json:"keys"`
}

type keyDoc struct {
	State       KeyState  `json:"state"`
	Incarnation string    `json:"incarnation,omitempty"`
	LastError   *string   `json:"last_error,omitempty"`
	Since       string    `json:"since"`
	Guard       *guardDoc `json:"guard,omitempty"`
	Hourly      *guardDoc `json:"hourly,omitempty"`
}

// Writing.

func encodeSnapshot(doc any) ([]byte, error) {
	return json.MarshalIndent(doc, "", "  ")
}

// stamp writes t as RFC 3339 with nanoseconds, in UTC; a year outside 0 to
// 9999 is written expanded (ISO 8601), as time.Format writes it. It fails
// only for a time that does not read back as the same instant.
func stamp(t time.Time) (string, error) {
	t = t.UTC()
	s := t.Format(time.RFC3339Nano)
	if y := t.Year(); y >= 0 && y <= 9999 {
		return s, nil // RFC 3339 proper: time.Parse reads it back
	}
	if back, err := parseStamp(s); err != nil || !back.Equal(t) {
		return "", fmt.Errorf("crashloop: snapshot: time %s cannot be written and read back", s)
	}
	return s, nil
}

// parseStamp reads a time written by stamp: RFC 3339, or RFC 3339 with an
// expanded year (a sign, or more than four digits).
func parseStamp(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil {
		return t, nil
	}
	i := 0
	if strings.HasPrefix(s, "-") {
		i = 1
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j-i < 4 || (i == 0 && j == 4) || j == len(s) || s[j] != '-' {
		return time.Time{}, err
	}
	year, yerr := strconv.Atoi(s[:j])
	if yerr != nil {
		return time.Time{}, err
	}
	rest, err := time.Parse(time.RFC3339Nano, "2000"+s[j:]) // a leap year: any day reads
	if err != nil {
		return time.Time{}, err
	}
	t = time.Date(year, rest.Month(), rest.Day(), rest.Hour(), rest.Minute(), rest.Second(), rest.Nanosecond(), rest.Location())
	if t.Day() != rest.Day() {
		return time.Time{}, fmt.Errorf("parsing time %q: day out of range", s)
	}
	return t, nil
}

// writer turns the times of one object into text and keeps the first error.
// It runs with no lock held: the state is copied under the object's locks
// first (see copyWindow), so that formatting a large snapshot does not hold
// up the object.
type writer struct {
	tl     *timeline
	high   int64 // the object's mark (the latest of its shards'), read with the state
	err    error
	events bool // whether at wrote an event time
}

// wall writes a clock reading.
func (w *writer) wall(t time.Time) string {
	s, err := stamp(t)
	if err != nil && w.err == nil {
		w.err = err
	}
	return s
}

// at writes the time of an event, an offset of the object's timeline, as a
// wall-clock time.
func (w *writer) at(off int64) string {
	w.events = true
	return w.wall(w.tl.base.Add(time.Duration(off)))
}

// latest writes the object's mark, or "" if the object read no
// time. Call it after the events: a reading so early that its offset
// saturated leaves the mark at its initial math.MinInt64, and the events
// then need it written all the same.
func (w *writer) latest() string {
	if w.high != math.MinInt64 || w.events {
		return w.wall(w.tl.base.Add(time.Duration(w.high)))
	}
	return ""
}

// copyWindow copies the events of a window, oldest first (nil when empty);
// the window's owner must be locked. A window is always in order (see
// window.push).
func copyWindow(win *window) []int64 {
	if win.n == 0 {
		return nil
	}
	offs := make([]int64, win.n)
	for i := range offs {
		j := int(win.head) + i
		if j >= len(win.buf) {
			j -= len(win.buf)
		}
		offs[i] = win.buf[j]
	}
	return offs
}

// times writes the events copied from a window (nil when empty).
func (w *writer) times(offs []int64) []string {
	if len(offs) == 0 {
		return nil
	}
	out := make([]string, len(offs))
	for i, off := range offs {
		out[i] = w.at(off)
	}
	return out
}

// errorText returns the text of err, or nil for no error.
func errorText(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// Reading.

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
// restoring object's timeline, checking them as it goes.
type reader struct {
	tl        *timeline
	horizon   time.Time // times after it are in the future
	latest    time.Time // the document's latest reading
	hasLatest bool
	latestOff int64 // latest on tl, or math.MinInt64
}

// newReader reads the latest reading of a document restored at now into an
// object with timeline tl whose latest time seen is high (its mark, or the
// latest of its shards' marks).
func newReader(tl *timeline, high int64, now time.Time, latest, path string) (*reader, error) {
	if h := high; h != math.MinInt64 {
		if seen := tl.base.Add(time.Duration(h)); seen.After(now) {
			now = seen // time never runs backwards
		}
	}
	r := &reader{tl: tl, horizon: now.Add(MaxSnapshotSkew), latestOff: math.MinInt64}
	if latest != "" {
		t, err := r.time(latest, path+".latest")
		if err != nil {
			return nil, err
		}
		r.latest, r.hasLatest, r.latestOff = t, true, r.off(t)
	}
	return r, nil
}

// time reads a wall-clock time, in the location of the timeline's base.
func (r *reader) time(s, field string) (time.Time, error) {
	if s == "" {
		return time.Time{}, badSnapshot("%s: missing time", field)
	}
	t, err := parseStamp(s)
	if err != nil {
		return time.Time{}, badSnapshot("%s: %v", field, err)
	}
	if t.After(r.horizon) {
		return time.Time{}, badSnapshot("%s: %s lies in the future (more than %v after now, %s)",
			field, s, MaxSnapshotSkew, r.horizon.Add(-MaxSnapshotSkew).UTC().Format(time.RFC3339Nano))
	}
	return t.In(r.tl.base.Location()), nil
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

// off returns the offset of t on the timeline.
func (r *reader) off(t time.Time) int64 { return int64(t.Sub(r.tl.base)) }

// window reads the events of a window of limit.
func (r *reader) window(times []string, limit int, field string) (window, error) {
	if len(times) > limit || len(times) > maxWindowSlots {
		return window{}, badSnapshot("%s: %d events, more than the limit of %d", field, len(times), min(limit, maxWindowSlots))
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
	return window{buf: buf, n: int32(len(buf))}, nil
}

// count checks that a count is not negative.
func count(n int, field string) error {
	if n < 0 {
		return badSnapshot("%s: negative count %d", field, n)
	}
	return nil
}

// restoredError is a restored error that still matches its sentinel.
type restoredError struct {
	msg      string
	sentinel error
}

func (e *restoredError) Error() string        { return e.msg }
func (e *restoredError) Is(target error) bool { return target == e.sentinel }

// restoreError turns a saved error text back into an error.
func restoreError(text *string, reason string) error {
	switch {
	case text == nil:
		return nil
	case reason == ReasonNeedsHuman:
		return &restoredError{msg: *text, sentinel: ErrNeedsHuman}
	}
	return errors.New(*text)
}

// freeTimeline is the timeline of a part that is checked and thrown away.
func freeTimeline(now time.Time) *timeline {
	return &timeline{base: now}
}

// Keyed tables.

// lockAll locks every shard, in order (one shard at a time is the order of
// every other caller, so this cannot deadlock).
func (k *keyed[E]) lockAll() {
	for i := range k.shards {
		k.shards[i].mu.Lock()
	}
}

func (k *keyed[E]) unlockAll() {
	for i := range k.shards {
		k.shards[i].mu.Unlock()
	}
}

// latest returns the latest time any shard has seen (math.MinInt64 if
// none). The shards must be locked.
func (k *keyed[E]) latest() int64 {
	h := int64(math.MinInt64)
	for i := range k.shards {
		h = max(h, k.shards[i].mark.high)
	}
	return h
}

// latestNow is latest, locking each shard in turn; math.MinInt64 for a nil
// table (a document that is only checked).
func (k *keyed[E]) latestNow() int64 {
	h := int64(math.MinInt64)
	if k == nil {
		return h
	}
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		h = max(h, s.mark.high)
		s.mu.Unlock()
	}
	return h
}

// replace swaps in new tables, one a shard, all at once, and raises every
// shard's mark to latest.
func (k *keyed[E]) replace(tabs *[shardCount]table[E], latest int64) {
	k.lockAll()
	for i := range k.shards {
		s := &k.shards[i]
		s.tab, s.calls = tabs[i], 0
		s.mark.raise(latest)
	}
	k.unlockAll()
}

// building is the table of a keyed state being restored: it places keys by
// the hash of the table it will replace (or by any hash when it is only
// checked).
type building[E any] struct {
	hash hasher
	tabs [shardCount]table[E]
}

func newBuilding[E any](keys *keyed[E]) *building[E] {
	if keys != nil {
		return &building[E]{hash: keys.hash}
	}
	return &building[E]{hash: newHasher()}
}

// add adds key, which must be new, with entry e.
func (b *building[E]) add(key string, e E) {
	i, h := place(b.hash, key)
	b.tabs[i].add(h, key).val = e
}

// sortedKeys returns the keys of m, sorted, so that the first error found
// in a document is always the same one.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// RespawnBudget.

// Snapshot returns the whole state of the budget (every key's respawn
// window, last backoff and park) as a JSON document of kind
// "respawn_budget" (see SnapshotVersion for the format). It is taken at one
// instant, consistent across keys, and changes nothing. It fails only for a
// time that cannot be written and read back (see SnapshotVersion). It is
// safe for concurrent use.
func (b *RespawnBudget) Snapshot() ([]byte, error) {
	doc, err := b.doc()
	if err != nil {
		return nil, err
	}
	return encodeSnapshot(doc)
}

func (b *RespawnBudget) doc() (*budgetDoc, error) {
	type entry struct {
		key  string
		win  []int64
		prev time.Duration
		park *ParkedError // immutable: read with no lock held
	}
	var entries []entry
	w := &writer{tl: &b.tl}
	b.keys.lockAll()
	for i := range b.keys.shards {
		b.keys.shards[i].each(func(key string, e *budgetEntry) {
			entries = append(entries, entry{key, copyWindow(&e.win), e.prev, e.park})
		})
	}
	w.high = b.keys.latest()
	b.keys.unlockAll()
	doc := &budgetDoc{Version: SnapshotVersion, Kind: kindBudget, Keys: make(map[string]budgetKeyDoc, len(entries))}
	for _, e := range entries {
		kd := budgetKeyDoc{Respawns: w.times(e.win)}
		if e.prev != 0 {
			kd.PrevBackoff = e.prev.String()
		}
		if pe := e.park; pe != nil { // pe.LastError.Error is the application's code: no lock held
			kd.Parked = &parkDoc{Reason: pe.Reason, LastError: errorText(pe.LastError), Attempts: pe.Attempts, Since: w.wall(pe.Since)}
		}
		doc.Keys[e.key] = kd
	}
	doc.Latest = w.latest()
	return doc, w.err
}

// Restore is shorthand for RestoreAt(data, clock.Now()).
func (b *RespawnBudget) Restore(data []byte) error { return b.RestoreAt(data, b.o.clock.Now()) }

// RestoreAt replaces the whole state of the budget with the snapshot in
// data (a document of kind "respawn_budget", see SnapshotVersion), read at
// now: the windows age from the times they hold, so a restore a day later
// finds them empty. A document it cannot restore returns an error matching
// ErrBadSnapshot and leaves the budget unchanged. It publishes no event and
// is safe for concurrent use.
func (b *RespawnBudget) RestoreAt(data []byte, now time.Time) error {
	var doc budgetDoc
	if err := decodeSnapshot(data, kindBudget, &doc); err != nil {
		return err
	}
	st, err := prepareBudget(&doc, &b.tl, b.cfg.MaxRespawns, &b.keys, now, kindBudget)
	if err != nil {
		return err
	}
	b.install(st)
	return nil
}

type budgetState struct {
	latest int64
	keys   *building[budgetEntry]
}

// prepareBudget checks a budget document against tl and limit and builds
// the state to install into keys (nil keys: check only).
func prepareBudget(doc *budgetDoc, tl *timeline, limit int, keys *keyed[budgetEntry], now time.Time, path string) (*budgetState, error) {
	if err := checkHeader(doc.Version, doc.Kind, kindBudget, path); err != nil {
		return nil, err
	}
	r, err := newReader(tl, keys.latestNow(), now, doc.Latest, path)
	if err != nil {
		return nil, err
	}
	st := &budgetState{latest: r.latestOff, keys: newBuilding(keys)}
	for _, key := range sortedKeys(doc.Keys) {
		kd, kp := doc.Keys[key], fmt.Sprintf("%s.keys[%q]", path, key)
		e := &budgetEntry{}
		if e.win, err = r.window(kd.Respawns, limit, kp+".respawns"); err != nil {
			return nil, err
		}
		if kd.PrevBackoff != "" {
			if e.prev, err = time.ParseDuration(kd.PrevBackoff); err != nil {
				return nil, badSnapshot("%s.prev_backoff: %v", kp, err)
			}
		}
		if p := kd.Parked; p != nil {
			if p.Reason == "" {
				return nil, badSnapshot("%s.parked.reason: missing: a parked key must say why", kp)
			}
			if err := count(p.Attempts, kp+".parked.attempts"); err != nil {
				return nil, err
			}
			since, err := r.time(p.Since, kp+".parked.since")
			if err != nil {
				return nil, err
			}
			e.park = &ParkedError{Key: key, Reason: p.Reason, LastError: restoreError(p.LastError, p.Reason),
				Attempts: p.Attempts, Since: since}
		}
		st.keys.add(key, *e)
	}
	return st, nil
}

func (b *RespawnBudget) install(st *budgetState) {
	b.keys.replace(&st.keys.tabs, st.latest)
}

// ChainDetector.

// Snapshot returns the whole state of the detector (every key's newest
// rescue, its incarnation, the chain ending there and the needs-human mark)
// as a JSON document of kind "chain_detector" (see SnapshotVersion for the
// format). It is taken at one instant, consistent across keys, and changes
// nothing. It fails only for a time that cannot be written and read back.
// It is safe for concurrent use.
func (d *ChainDetector) Snapshot() ([]byte, error) {
	doc, err := d.doc()
	if err != nil {
		return nil, err
	}
	return encodeSnapshot(doc)
}

func (d *ChainDetector) doc() (*chainDoc, error) {
	type entry struct {
		key string
		chainEntry
	}
	var entries []entry
	w := &writer{tl: &d.tl}
	d.keys.lockAll()
	for i := range d.keys.shards {
		d.keys.shards[i].each(func(key string, e *chainEntry) {
			entries = append(entries, entry{key, *e})
		})
	}
	w.high = d.keys.latest()
	d.keys.unlockAll()
	doc := &chainDoc{Version: SnapshotVersion, Kind: kindChain, Keys: make(map[string]chainKeyDoc, len(entries))}
	for _, e := range entries {
		doc.Keys[e.key] = chainKeyDoc{Incarnation: e.inc, Last: w.at(e.last), Count: e.count, Escalated: e.escalated}
	}
	doc.Latest = w.latest()
	return doc, w.err
}

// Restore is shorthand for RestoreAt(data, clock.Now()).
func (d *ChainDetector) Restore(data []byte) error { return d.RestoreAt(data, d.o.clock.Now()) }

// RestoreAt replaces the whole state of the detector with the snapshot in
// data (a document of kind "chain_detector", see SnapshotVersion), read at
// now: a chain whose newest rescue is more than ResetGap before now has
// ended. A document it cannot restore returns an error matching
// ErrBadSnapshot and leaves the detector unchanged. It publishes no event
// and is safe for concurrent use.
func (d *ChainDetector) RestoreAt(data []byte, now time.Time) error {
	var doc chainDoc
	if err := decodeSnapshot(data, kindChain, &doc); err != nil {
		return err
	}
	st, err := prepareChain(&doc, &d.tl, d.cfg.MaxChain, &d.keys, now, kindChain)
	if err != nil {
		return err
	}
	d.install(st)
	return nil
}

type chainState struct {
	latest int64
	keys   *building[chainEntry]
}

// prepareChain checks a chain document against tl and maxChain and builds
// the state to install into keys (nil keys: check only).
func prepareChain(doc *chainDoc, tl *timeline, maxChain int, keys *keyed[chainEntry], now time.Time, path string) (*chainState, error) {
	if err := checkHeader(doc.Version, doc.Kind, kindChain, path); err != nil {
		return nil, err
	}
	r, err := newReader(tl, keys.latestNow(), now, doc.Latest, path)
	if err != nil {
		return nil, err
	}
	st := &chainState{latest: r.latestOff, keys: newBuilding(keys)}
	for _, key := range sortedKeys(doc.Keys) {
		kd, kp := doc.Keys[key], fmt.Sprintf("%s.keys[%q]", path, key)
		if err := count(kd.Count, kp+".count"); err != nil {
			return nil, err
		}
		if kd.Count > maxChain {
			return nil, badSnapshot("%s.count: a chain of %d, longer than the max chain of %d", kp, kd.Count, maxChain)
		}
		last, err := r.event(kd.Last, kp+".last")
		if err != nil {
			return nil, err
		}
		st.keys.add(key, chainEntry{inc: kd.Incarnation, last: r.off(last), count: kd.Count, escalated: kd.Escalated})
	}
	return st, nil
}

func (d *ChainDetector) install(st *chainState) {
	d.keys.replace(&st.keys.tabs, st.latest)
}

// RestartLoopGuard.

// Snapshot returns the whole state of the guard (the restarts in its window,
// and for readers whether they trip it at the latest time seen) as a JSON document of kind
// "restart_loop_guard" (see SnapshotVersion for the format). It changes
// nothing and fails only for a time that cannot be written and read back.
// It is safe for concurrent use.
func (g *RestartLoopGuard) Snapshot() ([]byte, error) {
	doc, err := g.doc()
	if err != nil {
		return nil, err
	}
	return encodeSnapshot(doc)
}

func (g *RestartLoopGuard) doc() (*guardDoc, error) {
	w := &writer{tl: &g.tl}
	g.mu.Lock()
	win, tripped := copyWindow(&g.win), g.win.len() >= g.cfg.MaxRestarts
	w.high = g.mark.high
	g.mu.Unlock()
	doc := &guardDoc{Version: SnapshotVersion, Kind: kindGuard, Restarts: w.times(win), Tripped: tripped}
	doc.Latest = w.latest()
	return doc, w.err
}

// Restore is shorthand for RestoreAt(data, clock.Now()).
func (g *RestartLoopGuard) Restore(data []byte) error { return g.RestoreAt(data, g.o.clock.Now()) }

// RestoreAt replaces the whole state of the guard with the snapshot in data
// (a document of kind "restart_loop_guard", see SnapshotVersion), read at
// now: restarts older than the window at now no longer count. A document it
// cannot restore returns an error matching ErrBadSnapshot and leaves the
// guard unchanged. It publishes no event and is safe for concurrent use.
func (g *RestartLoopGuard) RestoreAt(data []byte, now time.Time) error {
	var doc guardDoc
	if err := decodeSnapshot(data, kindGuard, &doc); err != nil {
		return err
	}
	st, err := prepareGuard(&doc, &g.tl, g.latest(), g.cfg.MaxRestarts, now, kindGuard)
	if err != nil {
		return err
	}
	g.install(st)
	return nil
}

// guardState is a checked guard document. Its "tripped" is informative
// only: the guard derives it from the window.
type guardState struct {
	latest int64
	win    window
}

// prepareGuard checks a guard document against an object with timeline tl
// and mark high, and limit.
func prepareGuard(doc *guardDoc, tl *timeline, high int64, limit int, now time.Time, path string) (*guardState, error) {
	if err := checkHeader(doc.Version, doc.Kind, kindGuard, path); err != nil {
		return nil, err
	}
	r, err := newReader(tl, high, now, doc.Latest, path)
	if err != nil {
		return nil, err
	}
	win, err := r.window(doc.Restarts, limit, path+".restarts")
	if err != nil {
		return nil, err
	}
	return &guardState{latest: r.latestOff, win: win}, nil
}

// latest returns the guard's mark.
func (g *RestartLoopGuard) latest() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mark.high
}

func (g *RestartLoopGuard) install(st *guardState) {
	g.mu.Lock()
	g.mark.raise(st.latest)
	g.win = st.win
	g.mu.Unlock()
}

// FleetSupervisionPolicy.

// Snapshot returns the whole state of the breaker (the restarts in its
// rolling hour, the trip and its time, the fleet state last noted) as a
// JSON document of kind "fleet_supervision_policy" (see SnapshotVersion for
// the format). It changes nothing (a breaker due to re-arm re-arms at the
// next call, after a restore as before) and fails only for a time that
// cannot be written and read back. It is safe for concurrent use.
func (p *FleetSupervisionPolicy) Snapshot() ([]byte, error) {
	doc, err := p.doc()
	if err != nil {
		return nil, err
	}
	return encodeSnapshot(doc)
}

func (p *FleetSupervisionPolicy) doc() (*fleetDoc, error) {
	w := &writer{tl: &p.tl}
	p.mu.Lock()
	hour, tripped, since, sinceAt := copyWindow(&p.hour), p.tripped, p.since, p.sinceAt
	doc := &fleetDoc{Version: SnapshotVersion, Kind: kindFleet, Tripped: tripped, Failing: p.failing, Total: p.total}
	w.high = p.mark.high
	p.mu.Unlock()
	doc.Restarts = w.times(hour)
	if tripped {
		doc.Since = w.at(since)
		if !sinceAt.Equal(p.tl.base.Add(time.Duration(since))) {
			doc.SinceClock = w.wall(sinceAt)
		}
	}
	doc.Latest = w.latest()
	return doc, w.err
}

// Restore is shorthand for RestoreAt(data, clock.Now()).
func (p *FleetSupervisionPolicy) Restore(data []byte) error {
	return p.RestoreAt(data, p.o.clock.Now())
}

// RestoreAt replaces the whole state of the breaker with the snapshot in
// data (a document of kind "fleet_supervision_policy", see
// SnapshotVersion), read at now: a trip whose cooldown has ended by now
// re-arms (with EventFleetRearmed) at the next call. A document it cannot
// restore returns an error matching ErrBadSnapshot and leaves the breaker
// unchanged. It publishes no event and is safe for concurrent use.
func (p *FleetSupervisionPolicy) RestoreAt(data []byte, now time.Time) error {
	var doc fleetDoc
	if err := decodeSnapshot(data, kindFleet, &doc); err != nil {
		return err
	}
	st, err := prepareFleet(&doc, &p.tl, p.latest(), p.cfg.RestartsPerHour, now, kindFleet)
	if err != nil {
		return err
	}
	p.install(st)
	return nil
}

type fleetState struct {
	latest         int64
	hour           window
	tripped        bool
	since          int64
	sinceAt        time.Time
	failing, total int
}

// prepareFleet checks a fleet document against an object with timeline tl
// and mark high, and limit.
func prepareFleet(doc *fleetDoc, tl *timeline, high int64, limit int, now time.Time, path string) (*fleetState, error) {
	if err := checkHeader(doc.Version, doc.Kind, kindFleet, path); err != nil {
		return nil, err
	}
	r, err := newReader(tl, high, now, doc.Latest, path)
	if err != nil {
		return nil, err
	}
	st := &fleetState{latest: r.latestOff, tripped: doc.Tripped, failing: doc.Failing, total: doc.Total}
	if st.hour, err = r.window(doc.Restarts, limit, path+".restarts"); err != nil {
		return nil, err
	}
	if err := count(doc.Failing, path+".failing"); err != nil {
		return nil, err
	}
	if err := count(doc.Total, path+".total"); err != nil {
		return nil, err
	}
	if doc.Failing > doc.Total {
		return nil, badSnapshot("%s.failing: %d failing members of %d", path, doc.Failing, doc.Total)
	}
	if doc.Tripped || doc.Since != "" {
		since, err := r.event(doc.Since, path+".since")
		if err != nil {
			return nil, err
		}
		st.since, st.sinceAt = r.off(since), since
		if doc.SinceClock != "" {
			if st.sinceAt, err = r.time(doc.SinceClock, path+".since_clock"); err != nil {
				return nil, err
			}
		}
	}
	return st, nil
}

// latest returns the breaker's mark.
func (p *FleetSupervisionPolicy) latest() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mark.high
}

func (p *FleetSupervisionPolicy) install(st *fleetState) {
	p.mu.Lock()
	p.mark.raise(st.latest)
	p.hour, p.tripped, p.since, p.sinceAt = st.hour, st.tripped, st.since, st.sinceAt
	p.failing, p.total = st.failing, st.total
	p.mu.Unlock()
}

// Supervisor.

// Snapshot returns the whole state of the Supervisor as a JSON document of
// kind "supervisor" (see SnapshotVersion for the format): its budget, chain
// detector and fleet breaker, and per key the state, incarnation, last
// error, time of the last state change and the per-key guard and hourly
// windows. Each part is taken at one instant; the parts are taken one after
// the other, so a snapshot taken while a Run is deciding may catch a key
// between two of them (the saves of WithStore are taken after each change).
// It changes nothing and fails only for a time that cannot be written and
// read back.
// It is safe for concurrent use.
func (s *Supervisor) Snapshot() ([]byte, error) {
	doc, err := s.doc()
	if err != nil {
		return nil, err
	}
	return encodeSnapshot(doc)
}

func (s *Supervisor) doc() (*supervisorDoc, error) {
	type entry struct {
		key           string
		state         KeyState
		incarnation   string
		lastErr       error
		since         time.Time
		guard, hourly *RestartLoopGuard
	}
	var entries []entry
	doc := &supervisorDoc{Version: SnapshotVersion, Kind: kindSupervisor}
	s.mu.Lock()
	doc.Seq = s.seq
	for key, kr := range s.keys {
		entries = append(entries, entry{key, kr.state, kr.incarnation, kr.lastErr, kr.since, kr.guard, kr.hourly})
	}
	s.mu.Unlock()
	// With no lock held: the guards lock themselves, and Error is the
	// application's code.
	w := &writer{}
	doc.Keys = make(map[string]keyDoc, len(entries))
	var err error
	for _, e := range entries {
		kd := keyDoc{State: e.state, Incarnation: e.incarnation, LastError: errorText(e.lastErr), Since: w.wall(e.since)}
		if e.guard != nil {
			if kd.Guard, err = e.guard.doc(); err != nil {
				return nil, err
			}
		}
		if e.hourly != nil {
			if kd.Hourly, err = e.hourly.doc(); err != nil {
				return nil, err
			}
		}
		doc.Keys[e.key] = kd
	}
	if w.err != nil {
		return nil, w.err
	}
	if doc.Budget, err = s.budget.doc(); err != nil {
		return nil, err
	}
	if s.chain != nil {
		if doc.Chain, err = s.chain.doc(); err != nil {
			return nil, err
		}
	}
	if s.fleet != nil {
		if doc.Fleet, err = s.fleet.doc(); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

// Restore is shorthand for RestoreAt(data, clock.Now()).
func (s *Supervisor) Restore(data []byte) error { return s.RestoreAt(data, s.o.clock.Now()) }

// RestoreAt replaces the whole state of the Supervisor with the snapshot in
// data (a document of kind "supervisor", see SnapshotVersion), read at now:
// parked and needs_human keys stay parked (Run refuses them with their
// *ParkedError until Resume), and windows, chains and the fleet breaker age
// from the times they hold. Parts for guards that this Supervisor has off
// are checked and ignored; guards it has on that the snapshot lacks start
// empty. A key that was running, in backoff or held is restored as exited
// (since now). A document it cannot restore returns an error matching
// ErrBadSnapshot and leaves the Supervisor unchanged; so does a Restore
// while a Run is in progress (an error matching ErrAlreadyRunning). It
// publishes no event and saves nothing. NewSupervisor calls it with the
// document of WithStore.
func (s *Supervisor) RestoreAt(data []byte, now time.Time) error {
	var doc supervisorDoc
	if err := decodeSnapshot(data, kindSupervisor, &doc); err != nil {
		return err
	}
	st, err := s.prepare(&doc, now)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range sortedKeys(s.keys) {
		if s.keys[key].running {
			return fmt.Errorf("%w: %q: a Supervisor cannot be restored while it runs a key", ErrAlreadyRunning, key)
		}
	}
	s.budget.install(st.budget)
	if s.chain != nil {
		s.chain.install(st.chain)
	}
	if s.fleet != nil {
		s.fleet.install(st.fleet)
	}
	s.keys, s.seq = st.keys, st.seq
	return nil
}

type supervisorState struct {
	seq    uint64
	budget *budgetState
	chain  *chainState
	fleet  *fleetState
	keys   map[string]*keyRun
}

// prepare checks every part of a Supervisor document and builds the state
// to install; the per-key guards are new objects, restored here.
func (s *Supervisor) prepare(doc *supervisorDoc, now time.Time) (*supervisorState, error) {
	const path = kindSupervisor
	st := &supervisorState{seq: doc.Seq, keys: make(map[string]*keyRun)}
	if doc.Budget == nil {
		return nil, badSnapshot("%s.budget: missing", path)
	}
	var err error
	if st.budget, err = prepareBudget(doc.Budget, &s.budget.tl, s.cfg.Budget.MaxRespawns, &s.budget.keys, now, path+".budget"); err != nil {
		return nil, err
	}
	switch {
	case s.chain != nil && doc.Chain != nil:
		st.chain, err = prepareChain(doc.Chain, &s.chain.tl, s.cfg.Chain.MaxChain, &s.chain.keys, now, path+".chain")
	case s.chain != nil:
		st.chain, err = prepareChain(&chainDoc{Version: SnapshotVersion, Kind: kindChain}, &s.chain.tl, s.cfg.Chain.MaxChain, &s.chain.keys, now, path+".chain")
	case doc.Chain != nil: // off here: check only
		_, err = prepareChain(doc.Chain, freeTimeline(now), math.MaxInt, nil, now, path+".chain")
	}
	if err != nil {
		return nil, err
	}
	switch {
	case s.fleet != nil && doc.Fleet != nil:
		st.fleet, err = prepareFleet(doc.Fleet, &s.fleet.tl, s.fleet.latest(), s.cfg.Fleet.RestartsPerHour, now, path+".fleet")
	case s.fleet != nil:
		st.fleet = &fleetState{latest: math.MinInt64}
	case doc.Fleet != nil:
		_, err = prepareFleet(doc.Fleet, freeTimeline(now), math.MinInt64, math.MaxInt, now, path+".fleet")
	}
	if err != nil {
		return nil, err
	}
	for _, key := range sortedKeys(doc.Keys) {
		kd, kp := doc.Keys[key], fmt.Sprintf("%s.keys[%q]", path, key)
		kr, err := s.restoreKey(key, &kd, now, kp)
		if err != nil {
			return nil, err
		}
		st.keys[key] = kr
	}
	return st, nil
}

// restoreKey builds the state of one key, with its own guards as begin
// makes them.
func (s *Supervisor) restoreKey(key string, kd *keyDoc, now time.Time, kp string) (*keyRun, error) {
	kr := s.newKeyRun(key, kd.State, time.Time{})
	kr.incarnation, kr.lastErr = kd.Incarnation, restoreError(kd.LastError, "")
	r, _ := newReader(freeTimeline(now), math.MinInt64, now, "", kp)
	var err error
	if kr.since, err = r.time(kd.Since, kp+".since"); err != nil {
		return nil, err
	}
	switch kd.State {
	case StateParked, StateNeedsHuman, StateExited:
	case StateRunning, StateBackoff, StateHeld: // nothing runs after a restore
		kr.state, kr.since = StateExited, now
	default:
		return nil, badSnapshot("%s.state: unknown state %q", kp, kd.State)
	}
	if kr.state == StateNeedsHuman && kr.lastErr != nil {
		kr.lastErr = restoreError(kd.LastError, ReasonNeedsHuman)
	}
	if err := restoreKeyGuard(kr.guard, kd.Guard, now, kp+".guard"); err != nil {
		return nil, err
	}
	if err := restoreKeyGuard(kr.hourly, kd.Hourly, now, kp+".hourly"); err != nil {
		return nil, err
	}
	return kr, nil
}

// restoreKeyGuard restores doc into a new per-key guard g, or only checks
// it when the guard is off (nil g).
func restoreKeyGuard(g *RestartLoopGuard, doc *guardDoc, now time.Time, path string) error {
	if doc == nil {
		return nil
	}
	if g == nil {
		_, err := prepareGuard(doc, freeTimeline(now), math.MinInt64, math.MaxInt, now, path)
		return err
	}
	st, err := prepareGuard(doc, &g.tl, g.latest(), g.cfg.MaxRestarts, now, path)
	if err != nil {
		return err
	}
	g.install(st)
	return nil
}
