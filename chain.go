package crashloop

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/crashloopguard/crashloop/internal/rolling"
	"github.com/crashloopguard/crashloop/internal/settings"
)

// ChainConfig configures a ChainDetector, and the chain of a Supervisor
// (config key "chain"). The zero value is not valid; start from
// DefaultChainConfig.
type ChainConfig struct {
	MaxChain int // the chain at which the next rescue escalates ("max_chain"); default 3; >= 1
	// ResetGap is the longest gap between two rescues that keeps a chain,
	// exactly ResetGap included: longer than the slow loop's healthy
	// phase ("reset_gap"). Default 20m; > 0.
	ResetGap time.Duration
}

// DefaultChainConfig returns the defaults: escalate after 3 consecutive
// reactive rescues, each within 20 minutes of the last.
func DefaultChainConfig() ChainConfig {
	return ChainConfig{MaxChain: 3, ResetGap: 20 * time.Minute}
}

func (c *ChainConfig) settings() []settings.Setting {
	return []settings.Setting{
		settings.Int("max_chain", &c.MaxChain, func() string { return settings.Must(c.MaxChain >= 1, ">= 1") }),
		settings.Duration("reset_gap", &c.ResetGap, func() string { return settings.Must(c.ResetGap > 0, "> 0") }),
	}
}

func (c ChainConfig) validate() error { return checkSettings(c.settings()) }

// MarshalJSON writes the chain settings with their config keys, durations
// as strings.
func (c ChainConfig) MarshalJSON() ([]byte, error) { return settings.Marshal(c.settings()) }

// UnmarshalJSON reads chain settings; omitted keys keep their values.
func (c *ChainConfig) UnmarshalJSON(data []byte) error { return decodeSettings(data, "", c.settings()) }

// chainState is the chain of one key: its newest rescue, the incarnation
// rescued, and the length of the chain ending at it (0: it was planned).
// Memory is constant: the chain is a running count, not a list.
type chainState struct {
	inc   string
	last  int64
	count int
}

// length returns the chain of incarnation ending at t: the consecutive
// reactive rescues of that incarnation, each within ResetGap of the next
// (and the newest within ResetGap of t).
func (c ChainConfig) length(s *chainState, incarnation string, t int64) int {
	if s.count == 0 || s.inc != incarnation || !rolling.Within(t, s.last, c.ResetGap) {
		return 0
	}
	return s.count
}

// rescue asks to rescue incarnation at t. When the chain ending at t
// already holds MaxChain rescues it records nothing and returns the chain
// with full set: the key escalates. Otherwise it records the rescue and
// returns the new chain (0 for a planned rescue, which ends the chain).
func (c ChainConfig) rescue(s *chainState, incarnation string, reactive bool, t int64) (chain int, full bool) {
	n := c.length(s, incarnation, t)
	if n >= c.MaxChain {
		return n, true
	}
	if reactive {
		n++
	} else {
		n = 0
	}
	if s.inc != incarnation {
		s.inc = incarnation
	}
	s.last, s.count = t, n
	return n, false
}

// escalatedEvent is the EventChainEscalated of key's chain of n.
func (c ChainConfig) escalatedEvent(key, incarnation string, now time.Time, n int, cause error) Event {
	return Event{Kind: EventChainEscalated, Key: key, Incarnation: incarnation, Time: now,
		Reason: ReasonNeedsHuman, LastError: cause, Attempts: n, Limit: c.MaxChain, Window: c.ResetGap}
}

// ChainDetector catches the slow crash loop that passes every health check:
// a thing that is rescued, looks healthy, and dies again minutes later. It
// counts, per key, the consecutive reactive rescues of the live incarnation,
// each within ResetGap of the one after it (and the newest within ResetGap of
// now). A planned (non-reactive) rescue, a longer gap (a real recovery) or a
// rescue of another incarnation ends the chain. When the chain reaches
// MaxChain, the next rescue is refused and the key is marked needs-human.
//
// Memory per key is constant: the chain is kept as a running count. A
// ChainDetector is safe for concurrent use. The zero value is not usable:
// create one with NewChainDetector. Keys whose chain has ended and that are
// not marked are reclaimed a few at a time by later calls (no goroutine).
// Time never runs backwards for a detector: a reading earlier than one it
// already used is read as that later one.
type ChainDetector struct {
	cfg  ChainConfig
	o    options
	keys keyed[chainEntry]
}

type chainEntry struct {
	chainState
	escalated bool
}

// NewChainDetector returns a ChainDetector, or a *ConfigError naming the
// first invalid setting of cfg. DefaultChainConfig gives the defaults (3
// within 20m). It takes WithClock and WithEventHandler; any other Option
// makes it return a *ConfigError naming the option.
func NewChainDetector(cfg ChainConfig, opts ...Option) (*ChainDetector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(chainOptions, opts)
	if err != nil {
		return nil, err
	}
	d := &ChainDetector{cfg: cfg, o: o}
	d.keys.init(d.o.clock)
	return d, nil
}

// Config returns the configuration the detector was created with.
func (d *ChainDetector) Config() ChainConfig { return d.cfg }

// Rescue is shorthand for RescueAt(key, incarnation, reactive, clock.Now()).
func (d *ChainDetector) Rescue(key, incarnation string, reactive bool) (chain int, err error) {
	return d.RescueAt(key, incarnation, reactive, d.o.clock.Now())
}

// RescueAt asks to rescue (restart) key, whose live incarnation is
// incarnation, at now. reactive is true for a rescue forced by a crash and
// false for a planned one. If the chain ending now already has MaxChain
// rescues, RescueAt marks the key needs-human, publishes one
// EventChainEscalated, records nothing and returns the chain with an error
// matching ErrNeedsHuman; it keeps returning that error until Clear.
// Otherwise it records the rescue and returns the new chain length (0 for a
// planned rescue, which ends the chain). The empty key is refused with an
// error matching ErrInvalidKey.
func (d *ChainDetector) RescueAt(key, incarnation string, reactive bool, now time.Time) (int, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	t := d.keys.lockAt(now)
	e := d.keys.getOrAdd(key)
	if e.escalated {
		n, inc := e.count, e.inc
		d.keys.mu.Unlock()
		return n, &needsHumanError{key: key, incarnation: inc, chain: n}
	}
	n, full := d.cfg.rescue(&e.chainState, incarnation, reactive, t)
	if full {
		e.escalated = true
		d.keys.mu.Unlock()
		emit(d.o.handler, d.cfg.escalatedEvent(key, incarnation, now, n, nil))
		return n, &needsHumanError{key: key, incarnation: incarnation, chain: n}
	}
	d.keys.reclaim(func(e *chainEntry) bool { return !e.escalated && d.cfg.length(&e.chainState, e.inc, t) == 0 })
	d.keys.mu.Unlock()
	return n, nil
}

// Chain is shorthand for ChainAt(key, incarnation, clock.Now()).
func (d *ChainDetector) Chain(key, incarnation string) int {
	return d.ChainAt(key, incarnation, d.o.clock.Now())
}

// ChainAt returns the length of the chain of incarnation under key that ends
// at now. It records nothing.
func (d *ChainDetector) ChainAt(key, incarnation string, now time.Time) int {
	t := d.keys.lockAt(now)
	defer d.keys.mu.Unlock()
	if e := d.keys.get(key); e != nil {
		return d.cfg.length(&e.chainState, incarnation, t)
	}
	return 0
}

// NeedsHuman returns the keys marked needs-human, sorted.
func (d *ChainDetector) NeedsHuman() []string {
	return d.keys.collect(func(e *chainEntry) bool { return e.escalated })
}

// Clear is shorthand for ClearAt(key, clock.Now()).
func (d *ChainDetector) Clear(key string) { d.ClearAt(key, d.o.clock.Now()) }

// ClearAt is the operator's reset of key: it forgets the chain and the
// needs-human mark. Clearing a key that was marked needs-human publishes
// EventResumed (Reason "needs_human", Time now); clearing any other key
// publishes nothing.
func (d *ChainDetector) ClearAt(key string, now time.Time) {
	d.keys.mu.Lock()
	var e chainEntry
	if p := d.keys.get(key); p != nil {
		e = *p
	}
	d.keys.remove(key)
	d.keys.mu.Unlock()
	if e.escalated {
		emit(d.o.handler, Event{Kind: EventResumed, Key: key, Incarnation: e.inc, Time: now, Reason: ReasonNeedsHuman,
			Attempts: e.count, Limit: d.cfg.MaxChain, Window: d.cfg.ResetGap})
	}
}

// chainDoc is the snapshot document of a ChainDetector, and the chain part
// of a Supervisor's (see docs/snapshot.md).
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

func (w *writer) chain(s *chainState, escalated bool) chainKeyDoc {
	return chainKeyDoc{Incarnation: s.inc, Last: w.at(s.last), Count: s.count, Escalated: escalated}
}

// readChainKey reads the chain of one key.
func readChainKey(r *reader, kd chainKeyDoc, maxChain int, kp string) (chainState, error) {
	if err := count(kd.Count, kp+".count"); err != nil {
		return chainState{}, err
	}
	if kd.Count > maxChain {
		return chainState{}, badSnapshot("%s.count: a chain of %d, longer than the max chain of %d", kp, kd.Count, maxChain)
	}
	last, err := r.event(kd.Last, kp+".last")
	if err != nil {
		return chainState{}, err
	}
	return chainState{inc: kd.Incarnation, last: r.off(last), count: kd.Count}, nil
}

// Snapshot returns the whole state of the detector (every key's newest
// rescue, its incarnation, the chain ending there and the needs-human mark)
// as a JSON document of kind "chain_detector" (see SnapshotVersion for the
// format). It is taken at one instant, consistent across keys, and changes
// nothing. It fails only for a time that cannot be written and read back.
// It is safe for concurrent use.
func (d *ChainDetector) Snapshot() ([]byte, error) {
	type entry struct {
		key string
		chainEntry
	}
	return takeSnapshot(&d.keys.mu, &d.keys.tb, func() []entry {
		entries := make([]entry, 0, len(d.keys.order))
		d.keys.each(func(key string, e *chainEntry) { entries = append(entries, entry{key, *e}) })
		return entries
	}, func(w *writer, entries []entry) any {
		doc := &chainDoc{Version: SnapshotVersion, Kind: kindChain, Keys: make(map[string]chainKeyDoc, len(entries))}
		for _, e := range entries {
			doc.Keys[e.key] = w.chain(&e.chainState, e.escalated)
		}
		doc.Latest = w.latest()
		return doc
	})
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
	return restoreSnapshot(data, kindChain, now, &d.keys.mu, &d.keys.tb, d.read, d.keys.install)
}

// read checks a chain document and returns its keys and latest time, read
// on tb.
func (d *ChainDetector) read(doc *chainDoc, tb *timebase, now time.Time) (map[string]chainEntry, int64, error) {
	r, err := newReader(tb, now, doc.Latest, kindChain)
	if err != nil {
		return nil, 0, err
	}
	m := make(map[string]chainEntry, len(doc.Keys))
	for _, key := range slices.Sorted(maps.Keys(doc.Keys)) {
		kd := doc.Keys[key]
		s, err := readChainKey(r, kd, d.cfg.MaxChain, fmt.Sprintf("%s.keys[%q]", kindChain, key))
		if err != nil {
			return nil, 0, err
		}
		m[key] = chainEntry{chainState: s, escalated: kd.Escalated}
	}
	return m, r.latestOff, nil
}
