package crashloop

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"
)

// EventKind names a state change that an operator cares about. The zero
// value is not a valid kind; String returns the dotted name of each kind
// (for example "agent.respawn_scheduled") and "EventKind(N)" otherwise.
type EventKind int

// The kinds of Event, with the dotted name String returns.
const (
	EventRespawnScheduled   EventKind = iota + 1 // "agent.respawn_scheduled": a respawn after a failed start; Backoff the wait
	EventStartupExhausted                        // "agent.startup_exhausted": a key parked (budget or permanent error)
	EventResumed                                 // "agent.resumed": a parked key resumed; Reason the park's
	EventChainEscalated                          // "rescue.needs_human": a chain reached MaxChain; Attempts the chain
	EventGuardTripped                            // "channel.crash_loop_tripped": a per-key guard or the hourly cap tripped
	EventFleetTripped                            // "fleet.breaker_tripped": the fleet breaker tripped
	EventFleetRearmed                            // "fleet.breaker_rearmed": the fleet breaker re-armed; Reason the trip's
	EventRestartScheduled                        // "agent.restart_scheduled": a restart no budget judged; Attempts the key's restarts
	EventStoreUnavailable                        // "store.unavailable": the shared ledger fails; the Supervisor decides alone
	EventStoreRecovered                          // "store.recovered": the ledger is back; the parks made alone written back
	EventStoreStateLost                          // "store.state_lost": the ledger lost its state; known parks written back
	EventStoreMisconfigured                      // "store.misconfigured": the ledger fails in a way no retry fixes; Reason the cause
	EventFleetCauseHeld                          // "fleet.cause_held": the fleet holds the restarts failing with Cause; Attempts the keys
	EventFleetCauseReleased                      // "fleet.cause_released": a probe was healthy; Attempts the keys released
)

var eventKindNames = [...]string{
	EventRespawnScheduled:   "agent.respawn_scheduled",
	EventStartupExhausted:   "agent.startup_exhausted",
	EventResumed:            "agent.resumed",
	EventChainEscalated:     "rescue.needs_human",
	EventGuardTripped:       "channel.crash_loop_tripped",
	EventFleetTripped:       "fleet.breaker_tripped",
	EventFleetRearmed:       "fleet.breaker_rearmed",
	EventRestartScheduled:   "agent.restart_scheduled",
	EventStoreUnavailable:   "store.unavailable",
	EventStoreRecovered:     "store.recovered",
	EventStoreStateLost:     "store.state_lost",
	EventStoreMisconfigured: "store.misconfigured",
	EventFleetCauseHeld:     "fleet.cause_held",
	EventFleetCauseReleased: "fleet.cause_released",
}

// String returns the dotted name of k, such as "agent.startup_exhausted".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Stops reports whether an event of kind k announces that a key stopped
// being restarted, whatever guard decided it: a park
// (EventStartupExhausted), an escalation to a human (EventChainEscalated)
// or a tripped per-key guard (EventGuardTripped). The fleet breaker holds
// restarts without stopping any key, so EventFleetTripped does not stop
// one.
func (k EventKind) Stops() bool {
	return k == EventStartupExhausted || k == EventChainEscalated || k == EventGuardTripped
}

// Event describes one state change. Fields that do not apply to a kind are
// zero. Events are values: a handler may keep them. A zero Event (Kind 0) is
// never delivered.
type Event struct {
	Kind        EventKind     // what changed; String gives its dotted name
	Key         string        // the key; a guard's or fleet's WithName
	Incarnation string        // chain events: the incarnation whose chain escalated
	Time        time.Time     // from the injected clock (or the explicit now)
	Reason      string        // a reason code such as ReasonBudgetExhausted ("respawn_budget_exhausted"); never a sentence
	LastError   error         // the failure that caused the change, if any
	Attempts    int           // respawns / restarts / chain length counted
	Limit       int           // max_respawns / max_restarts / max chain / fleet rate
	Window      time.Duration // window, reset gap or cooldown in force
	Backoff     time.Duration // EventRespawnScheduled, EventRestartScheduled: the wait before the restart
	Held        bool          // EventRespawnScheduled, EventRestartScheduled: the fleet holds the restart; Backoff is the wait until it may ask again
	Cause       string        // cause events, and a restart held for a shared cause: the normalized cause
	Failing     int           // fleet events: failing members last noted
	Total       int           // fleet events: members last noted
}

// EventHandler receives the events of a guard, a fleet policy or a
// Supervisor. HandleEvent runs synchronously on the goroutine that caused the
// change, after the change is committed and with no lock of this package
// held, so it may call back into the object that called it. Each state change
// is delivered exactly once. A handler that panics does not undo or hide the
// decision it was told of: the panic is recovered, logged to slog.Default at
// level ERROR with the event and the stack, and the call that published the
// event returns its result as usual. A handler shared by several objects, or
// by a Supervisor running many keys, must be safe for concurrent use. A nil
// EventHandler means no handler.
type EventHandler interface {
	HandleEvent(Event)
}

// EventHandlerFunc adapts an ordinary function to an EventHandler. A nil
// EventHandlerFunc ignores every event. It is as safe for concurrent use as
// the function is.
type EventHandlerFunc func(Event)

// HandleEvent calls f(ev).
func (f EventHandlerFunc) HandleEvent(ev Event) {
	if f != nil {
		f(ev)
	}
}

// MultiHandler returns an EventHandler that passes each event to every
// handler of hs in order, skipping nil ones. It is as safe for concurrent
// use as the handlers it calls.
func MultiHandler(hs ...EventHandler) EventHandler {
	list := make([]EventHandler, 0, len(hs))
	for _, h := range hs {
		if h != nil {
			list = append(list, h)
		}
	}
	return multiHandler(list)
}

type multiHandler []EventHandler

func (m multiHandler) HandleEvent(ev Event) {
	for _, h := range m {
		h.HandleEvent(ev)
	}
}

// emit delivers ev to h when there is a handler and ev is an event (a zero
// Event means nothing happened). A panic in h is recovered and logged (see
// EventHandler), so that the caller's decision stands. Callers must hold no
// lock.
func emit(h EventHandler, ev Event) {
	if h == nil || ev.Kind == 0 {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			slog.Default().Error("crashloop: event handler panicked; the decision stands",
				slog.String("event", ev.Kind.String()), slog.String("key", ev.Key),
				slog.String("panic", fmt.Sprint(r)), slog.String("stack", string(debug.Stack())))
		}
	}()
	h.HandleEvent(ev)
}

// emitAll delivers evs in order (see emit).
func emitAll(h EventHandler, evs []Event) {
	for _, ev := range evs {
		emit(h, ev)
	}
}

// events holds the few events of one call (three at most) until its lock
// is released, so that they are delivered after the change is committed.
type events struct {
	evs [3]Event
	n   int
}

func (e *events) add(ev Event) {
	if ev.Kind != 0 {
		e.evs[e.n] = ev
		e.n++
	}
}

func (e *events) list() []Event { return e.evs[:e.n] }
