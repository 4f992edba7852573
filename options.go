package crashloop

import (
	"math/bits"
	"strings"
	"time"
)

// Option configures a guard, a fleet policy or a Supervisor at
// construction. Each option's doc names the constructors that take it; any
// other returns a *ConfigError whose Field is the option's name. A nil
// Option is ignored. Options are immutable and may be reused.
type Option func(*options)

type options struct {
	given optionSet // the options passed (see constructor.takes)

	clock   Clock
	handler EventHandler
	name    string

	// Supervisor only.
	store     Store
	saveEvery time.Duration
	saveErr   func(error)
	sharing   Sharing
}

// optionSet is a set of Options, one bit each, indexed like optionNames.
type optionSet uint8

const (
	optClock optionSet = 1 << iota
	optHandler
	optName
	optStore
	optSaveInterval
	optSaveErrorHandler
	optSharing
)

// optionNames names the options of optionSet, bit i by optionNames[i].
var optionNames = [...]string{"WithClock", "WithEventHandler", "WithName", "WithStore", "WithSaveInterval", "WithSaveErrorHandler", "WithSharing"}

// constructor is a constructor and the options it takes.
type constructor struct {
	name  string
	with  string // when it takes less than its name says, e.g. " with a ledger"
	why   string // why it refuses what it refuses ("": nothing said)
	takes optionSet
}

var (
	budgetOptions     = constructor{name: "NewRespawnBudget", takes: optClock | optHandler}
	chainOptions      = constructor{name: "NewChainDetector", takes: optClock | optHandler}
	guardOptions      = constructor{name: "NewRestartLoopGuard", takes: optClock | optHandler | optName}
	fleetOptions      = constructor{name: "NewFleetSupervisionPolicy", takes: optClock | optHandler | optName}
	supervisorOptions = constructor{name: "NewSupervisor", takes: optClock | optHandler | optName | optStore | optSaveInterval | optSaveErrorHandler | optSharing}

	// constructors lists, in the package's order, who takes what, for the
	// rule of a refused option.
	constructors = [...]constructor{budgetOptions, chainOptions, guardOptions, fleetOptions, supervisorOptions}
)

// buildOptions applies opts in order, skipping nil ones, and returns them
// with the real clock when none is set, or a *ConfigError naming the first
// option that c does not take.
func buildOptions(c constructor, opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		opt(&o)
		if refused := o.given &^ c.takes; refused != 0 {
			return options{}, c.refuse(refused)
		}
	}
	if o.clock == nil {
		o.clock = realClock{}
	}
	return o, nil
}

// refuse returns the *ConfigError of the lowest option in refused, e.g.
// "WithStore = passed to NewRespawnBudget: must be passed only to
// NewSupervisor".
func (c constructor) refuse(refused optionSet) error {
	i := bits.TrailingZeros8(uint8(refused))
	var takers []string
	for _, t := range constructors {
		if t.takes&(1<<i) != 0 {
			takers = append(takers, t.name)
		}
	}
	rule := "passed only to " + strings.Join(takers[:len(takers)-1], ", ")
	if len(takers) > 1 {
		rule += " or "
	}
	rule += takers[len(takers)-1]
	if c.why != "" {
		rule += " (" + c.why + ")"
	}
	return &ConfigError{Field: optionNames[i], Value: "passed to " + c.name + c.with, Rule: rule}
}

// WithClock makes the object read time from c. The default, also used when c
// is nil, is the real clock. Pass a *clock.Mock from
// github.com/benbjohnson/clock to test code that uses this package. Every
// constructor takes it.
func WithClock(c Clock) Option {
	return func(o *options) { o.given |= optClock; o.clock = c }
}

// WithEventHandler makes the object announce its state changes to h. The
// default, also used when h is nil, is no handler: nothing is announced.
// Handlers run synchronously on the goroutine that caused the change, after
// the change is committed and with no lock of this package held. Every
// constructor takes it.
func WithEventHandler(h EventHandler) Option {
	return func(o *options) { o.given |= optHandler; o.handler = h }
}

// WithName labels the events of a RestartLoopGuard or a
// FleetSupervisionPolicy (Event.Key). The default is the empty string. A
// Supervisor gives the name to its fleet breaker (default "fleet", also used
// when name is empty); its per-key events carry the key of each call
// instead. NewRestartLoopGuard, NewFleetSupervisionPolicy and NewSupervisor
// take it; NewRespawnBudget and NewChainDetector, whose events carry the
// key of each call, return a *ConfigError.
func WithName(name string) Option {
	return func(o *options) { o.given |= optName; o.name = name }
}

// Store keeps one document: the latest snapshot of a Supervisor (see
// WithStore). Save replaces the document as a whole; Load returns the last
// document saved, or an error matching fs.ErrNotExist (os.ErrNotExist) when
// nothing was saved yet. A Store used by a Supervisor must be safe for
// concurrent use. *FileStore implements it; a nil Store means none.
type Store interface {
	Save(data []byte) error
	Load() ([]byte, error)
}

// WithStore makes a Supervisor durable. NewSupervisor loads the snapshot in
// st, and fails on any error but a missing document (fs.ErrNotExist), so a
// damaged file never silently resets the guards. The Supervisor saves to st
// on every park, escalation, Resume and Forget, and at most once per
// WithSaveInterval on other changes, after the change and with no lock held.
// A failed save never stops supervision: it goes to WithSaveErrorHandler.
// The default, also for a nil st, is no store. Only NewSupervisor takes it:
// every other constructor returns a *ConfigError, even for a nil st.
func WithStore(st Store) Option {
	return func(o *options) { o.given |= optStore; o.store = st }
}

// WithSaveInterval makes a Supervisor with a store also save on any state
// change of a key (a run starting, a backoff, a hold, an exit, a new last
// error) once d has passed, on the injected clock, since its last save. It
// starts no goroutine: a Supervisor with no state changes saves nothing. The
// default, also used when d <= 0, is to save only on parks, escalations,
// resumes and forgets. Without a store (no WithStore, or a nil one) it
// saves nothing. The constructors that take WithStore take it; the others
// return a *ConfigError.
func WithSaveInterval(d time.Duration) Option {
	return func(o *options) { o.given |= optSaveInterval; o.saveEvery = d }
}

// WithSaveErrorHandler makes a Supervisor with a store call h with the error
// of every save that failed (the store's own error, or the Snapshot error).
// h runs synchronously on the goroutine that saved, with no lock of this
// package held; it must be safe for concurrent use. The default, also used
// when h is nil, drops the error. Without a store it is never called. The
// constructors that take WithStore take it; the others return a
// *ConfigError.
func WithSaveErrorHandler(h func(error)) Option {
	return func(o *options) { o.given |= optSaveErrorHandler; o.saveErr = h }
}
