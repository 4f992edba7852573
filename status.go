package crashloop

import (
	"context"
	"time"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// KeyState is what a Supervisor is doing with a key. It marshals to JSON as
// its string value. The zero value, "", is not a state a Supervisor reports.
type KeyState string

// The states of a key.
const (
	StateRunning    KeyState = "running"     // fn is running
	StateBackoff    KeyState = "backoff"     // waiting out the backoff before a restart
	StateHeld       KeyState = "held"        // restart held by the fleet breaker or for a shared cause
	StateParked     KeyState = "parked"      // a guard gave up; Resume to run again
	StateNeedsHuman KeyState = "needs_human" // the chain escalated; Resume to run again
	StateExited     KeyState = "exited"      // not running: clean exit, ended context, or resumed
)

// Status is a snapshot of a Supervisor, for health endpoints and operator
// tools. It marshals to JSON as {"keys": {...}, "fleet": {...}}; fleet is
// omitted when the fleet breaker is off. It is a value the caller owns: the
// Supervisor keeps no reference to it.
type Status struct {
	Keys  map[string]KeyStatus `json:"keys"`            // every key the Supervisor knows (never nil from StatusAt with a live ctx)
	Fleet *FleetStatus         `json:"fleet,omitempty"` // nil when the fleet breaker is off
}

// KeyStatus is the state of one key in a Status.
type KeyStatus struct {
	State         KeyState  `json:"state"`                 // what the Supervisor is doing with the key
	Respawns      int       `json:"respawns"`              // respawns in the budget's window
	TotalRestarts int       `json:"total_restarts"`        // restarts since the key was first run or last resumed (systemd's NRestarts)
	CanRestart    bool      `json:"can_restart"`           // false when parked, needs_human, or the fleet is tripped
	LastError     string    `json:"last_error,omitempty"`  // text of the key's last failure; empty if none
	Reason        string    `json:"park_reason,omitempty"` // why it is parked (ParkedError.Reason); empty if not parked
	Incarnation   string    `json:"incarnation,omitempty"` // incarnation of the latest run (WithIncarnation, or "KEY#N")
	Since         time.Time `json:"since"`                 // time of the last state change
	// LocalRestarts counts the restarts this Supervisor scheduled, as
	// TotalRestarts does; with WithSharing, TotalRestarts is the
	// deployment's and LocalRestarts this replica's share.
	LocalRestarts int       `json:"local_restarts"`
	ParkedSince   time.Time `json:"parked_since,omitzero"` // ParkedError.Since; zero when not parked
	// ExitCode, Signal and StderrTail tell how the program of the last
	// failure ended, when its error tells (as the crashloop command's do):
	// the exit status (nil for a signal or unknown), the signal's name such
	// as "KILL", and its last lines on stderr.
	ExitCode   *int      `json:"exit_code,omitempty"`
	Signal     string    `json:"signal,omitempty"`
	StderrTail string    `json:"stderr_tail,omitempty"`
	NextProbe  time.Time `json:"next_probe,omitzero"` // when a parked key's next probe is due (ProbeAfter); zero if none
	Cause      string    `json:"cause,omitempty"`     // the shared cause its restart is held for; "" if none
}

// Status is shorthand for StatusAt(ctx, clock.Now()).
func (s *Supervisor) Status(ctx context.Context) Status { return s.StatusAt(ctx, s.o.clock.Now()) }

// StatusAt returns a snapshot of every key the Supervisor knows and of the
// fleet breaker at now, taken at one instant under the lock every decision
// takes. A breaker whose cooldown has ended re-arms first, as in every
// other call. Error texts are formatted after the lock is released.
//
// With a shared Ledger the fleet breaker is the ledger's: StatusAt asks it
// first, and ctx bounds that wait together with the ledger's own timeout
// (a ledger that fails leaves the breaker as this Supervisor keeps it
// alone). StatusAt has no error to return: if ctx is already done, or ends
// while StatusAt waits on the ledger, it returns at once the zero Status
// (nil Keys and Fleet), having changed and announced nothing, with or
// without a ledger; the caller tells by ctx.Err(). A caller's cancel is not
// a failure of the ledger. StatusAt is safe for concurrent use.
func (s *Supervisor) StatusAt(ctx context.Context, now time.Time) Status {
	ctx = orBackground(ctx)
	if ctx.Err() != nil {
		return Status{}
	}
	var shared *FleetStatus // the layer's fleet breaker; nil: none, or unknown
	if s.cfg.Fleet != nil && s.share != nil {
		fs, ok, err := s.share.Fleet(ctx, now)
		if err != nil {
			return Status{}
		}
		if ok {
			shared = &fs
		}
	}
	var evs events
	st := Status{Keys: make(map[string]KeyStatus)}
	errs := make(map[string]error)
	t := s.lockAt(now, &evs)
	tripped := false
	if s.cfg.Fleet != nil {
		fs := s.cfg.Fleet.status(&s.book.f, t, &s.tb)
		fs.HeldCauses = s.book.causes.heldCauses()
		st.Fleet, tripped = &fs, fs.BreakerTripped
	}
	for key, r := range s.keys {
		ks := KeyStatus{State: r.state, Respawns: s.cfg.Budget.count(&r.respawns, t), TotalRestarts: r.restarts,
			CanRestart: r.park == nil && !tripped, Incarnation: r.incarnation, Since: r.since}
		ks.LocalRestarts = r.restarts
		if s.share != nil {
			ks.LocalRestarts = r.local
		}
		if r.park != nil {
			ks.Reason, ks.ParkedSince, ks.NextProbe = r.park.Reason, r.park.Since, r.nextProbe
		}
		if r.held != 0 {
			ks.Cause = r.cause
		}
		if r.lastErr != nil {
			errs[key] = r.lastErr
		}
		st.Keys[key] = ks
	}
	s.mu.Unlock()
	emitAll(s.o.handler, evs.list())
	if shared != nil { // the fleet breaker is the ledger's
		st.Fleet = shared
		for key, ks := range st.Keys {
			ks.CanRestart = ks.Reason == "" && !shared.BreakerTripped
			st.Keys[key] = ks
		}
	}
	for key, err := range errs { // Error is the application's code: no lock held
		ks := st.Keys[key]
		ks.LastError = err.Error()
		if x, ok := errtext.ExitOf(err); ok {
			ks.ExitCode, ks.Signal, ks.StderrTail = x.ExitCode, x.Signal, x.StderrTail
		}
		st.Keys[key] = ks
	}
	return st
}
