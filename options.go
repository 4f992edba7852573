package crashloop

import "time"

// Option configures a guard, a fleet policy or a Supervisor at construction.
// Options are shared by every constructor of the package; a constructor
// ignores the options that do not apply to it. The zero set of options
// means the real clock, no event handler, an empty name and no store. A nil
// Option is ignored.
type Option func(*options)

type options struct {
	clock   Clock
	handler EventHandler
	name    string

	// Supervisor only.
	store     Store
	saveEvery time.Duration
	saveErr   func(error)
}

func buildOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.clock == nil {
		o.clock = realClock{}
	}
	return o
}

// WithClock makes the object read time from c. The default, also used when c
// is nil, is the real clock. Pass a *clock.Mock from
// github.com/benbjohnson/clock to test code that uses this package.
func WithClock(c Clock) Option {
	return func(o *options) { o.clock = c }
}

// WithEventHandler makes the object announce its state changes to h. The
// default, also used when h is nil, is no handler: nothing is announced.
// Handlers run synchronously on the goroutine that caused the change, after
// the change is committed and with no lock of this package held.
func WithEventHandler(h EventHandler) Option {
	return func(o *options) { o.handler = h }
}

// WithName labels the events of a RestartLoopGuard or a
// FleetSupervisionPolicy (Event.Key). The default is the empty string. A
// Supervisor gives the name to its fleet breaker (default "fleet"); its
// per-key events, and those of RespawnBudget and ChainDetector, carry the
// key of each call instead.
func WithName(name string) Option {
	return func(o *options) { o.name = name }
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

// WithStore makes a Supervisor durable: NewSupervisor loads the snapshot in
// st (a missing document, fs.ErrNotExist, is a fresh start; any other load
// error, or a document Restore rejects, makes NewSupervisor fail, so that a
// damaged file never silently resets the guards: fix or delete it), and the
// Supervisor saves its snapshot to st on every park, escalation
// (needs_human), Resume and Forget, plus at most once per WithSaveInterval
// on other state changes. Saves run on the goroutine that made the change,
// after the change, with no lock of the Supervisor held; they are
// serialized, so the last one saved is the newest. A failed save never stops
// supervision and is not returned by Run or Resume: it is passed to the
// WithSaveErrorHandler callback (by default it is dropped), and
// Supervisor.Save returns it. The default, also used when st is nil, is no
// store. Other constructors ignore this option.
func WithStore(st Store) Option {
	return func(o *options) { o.store = st }
}

// WithSaveInterval makes a Supervisor with a store also save on any state
// change of a key (a run starting, a backoff, a hold, an exit, a new last
// error) once d has passed, on the injected clock, since its last save. It
// starts no goroutine: a Supervisor with no state changes saves nothing. The
// default, also used when d <= 0, is to save only on parks, escalations,
// resumes and forgets. Other constructors ignore this option.
func WithSaveInterval(d time.Duration) Option {
	return func(o *options) { o.saveEvery = d }
}

// WithSaveErrorHandler makes a Supervisor with a store call h with the error
// of every save that failed (the store's own error, or the Snapshot error).
// h runs synchronously on the goroutine that saved, with no lock of this
// package held; it must be safe for concurrent use. The default, also used
// when h is nil, drops the error. Other constructors ignore this option.
func WithSaveErrorHandler(h func(error)) Option {
	return func(o *options) { o.saveErr = h }
}
