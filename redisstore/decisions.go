package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop"
)

// The decisions of each guard on Redis, with what the in-memory guard of the
// library returns and announces for the same call. The conformance tests
// hold each of them to its in-memory twin; the store built on the library's
// seam makes its decisions through them.

// budgetKeys and chainKeys are the keys of a budget or chain call: the
// guard's, and the set listing its kind's standing marks.
func (k *kernel) budgetKeys(key string) []string {
	return []string{k.keys.budget(key), k.keys.parked()}
}
func (k *kernel) chainKeys(key string) []string {
	return []string{k.keys.chain(key), k.keys.needsHuman()}
}

// parkedKeys returns the keys that stand parked, sorted
// (RespawnBudget.Parked, across every replica).
func (k *kernel) parkedKeys(ctx context.Context) ([]string, error) {
	return k.members(ctx, k.keys.parked())
}

// needsHumanKeys returns the keys marked needs-human, sorted
// (ChainDetector.NeedsHuman, across every replica).
func (k *kernel) needsHumanKeys(ctx context.Context) ([]string, error) {
	return k.members(ctx, k.keys.needsHuman())
}

func (k *kernel) members(ctx context.Context, set string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	keys, err := k.rdb.SMembers(ctx, set).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list %s: %w", set, err)
	}
	slices.Sort(keys)
	return keys, nil
}

// budgetDecision is the outcome of a failed start (RespawnBudget.FailedAt).
type budgetDecision struct {
	now       time.Time              // the time the call used (the server's in server-time mode)
	attempt   int                    // a respawn was granted: the respawns now in the window; else 0
	park      *crashloop.ParkedError // the park, when the key is parked (by this call or before)
	parkedNow bool                   // this call parked the key: it announces the park
}

// budgetFailed records a failed start of key with cause at now: a respawn if
// the window has room, else a park.
func (k *kernel) budgetFailed(ctx context.Context, cfg crashloop.BudgetConfig, key string, cause error, now time.Time) (budgetDecision, error) {
	r, err := k.run(ctx, "budget_failed", k.budgetKeys(key), cfg.Window, now, micros(cfg.Window), cfg.MaxRespawns, encodeCause(cause))
	if err != nil {
		return budgetDecision{}, err
	}
	return budgetOutcome(key, r), nil
}

// budgetPark parks key for a reason decided outside the budget (a
// Supervisor's permanent error, tripped guard or escalated chain); an already
// parked key keeps its first park.
func (k *kernel) budgetPark(ctx context.Context, cfg crashloop.BudgetConfig, key, reason string, cause error, now time.Time) (budgetDecision, error) {
	if strings.Contains(reason, "\n") {
		return budgetDecision{}, fmt.Errorf("redisstore: park reason %q: must be one line", reason)
	}
	r, err := k.run(ctx, "budget_park", k.budgetKeys(key), cfg.Window, now, micros(cfg.Window), reason, encodeCause(cause))
	if err != nil {
		return budgetDecision{}, err
	}
	return budgetOutcome(key, r), nil
}

// budgetOutcome reads the reply of budget_failed and budget_park.
func budgetOutcome(key string, r reply) budgetDecision {
	d := budgetDecision{now: fromMicros(r.int(1))}
	switch r.int(0) {
	case 0:
		d.attempt = int(r.int(2))
	default:
		d.park = parkAt(key, r, 2)
		d.parkedNow = r.int(0) == 1
	}
	return d
}

// parkAt reads a park (reason, cause, attempts, since) from r at i.
func parkAt(key string, r reply, i int) *crashloop.ParkedError {
	return &crashloop.ParkedError{Key: key, Reason: r.str(i), LastError: decodeCause(r.str(i + 1)),
		Attempts: int(r.int(i + 2)), Since: fromMicros(r.int(i + 3))}
}

// events returns what the in-memory budget announces for d: a respawn
// scheduled with backoff, or the park made by this call, or nothing.
func (d budgetDecision) events(key string, cfg crashloop.BudgetConfig, cause error, backoff time.Duration) []crashloop.Event {
	switch {
	case d.park == nil:
		return []crashloop.Event{{Kind: crashloop.EventRespawnScheduled, Key: key, Time: d.now, LastError: cause,
			Attempts: d.attempt, Limit: cfg.MaxRespawns, Window: cfg.Window, Backoff: backoff}}
	case d.parkedNow:
		return []crashloop.Event{parkEvent(d.park, cfg)}
	}
	return nil
}

// parkEvent is the EventStartupExhausted announcing pe.
func parkEvent(pe *crashloop.ParkedError, cfg crashloop.BudgetConfig) crashloop.Event {
	return crashloop.Event{Kind: crashloop.EventStartupExhausted, Key: pe.Key, Time: pe.Since, Reason: pe.Reason,
		LastError: pe.LastError, Attempts: pe.Attempts, Limit: cfg.MaxRespawns, Window: cfg.Window}
}

// budgetSpawn returns the park of key, or nil: the gate before every spawn.
func (k *kernel) budgetSpawn(ctx context.Context, key string) (*crashloop.ParkedError, error) {
	r, err := k.run(ctx, "budget_spawn", k.budgetKeys(key), 0, time.Time{})
	if err != nil || len(r) == 0 {
		return nil, err
	}
	return parkAt(key, r, 0), nil
}

// budgetView returns the respawns of key in the window at now and its park,
// if any (RespawnBudget.RespawnsAt and what a Status shows).
func (k *kernel) budgetView(ctx context.Context, cfg crashloop.BudgetConfig, key string, now time.Time) (int, *crashloop.ParkedError, error) {
	r, err := k.run(ctx, "budget_view", k.budgetKeys(key), cfg.Window, now, micros(cfg.Window))
	if err != nil {
		return 0, nil, err
	}
	if len(r) == 1 {
		return int(r.int(0)), nil, nil
	}
	return int(r.int(0)), parkAt(key, r, 1), nil
}

// budgetResume clears the park and the window of key (RespawnBudget.ResumeAt).
// It returns the EventResumed to announce, or ok false when key was not
// parked.
func (k *kernel) budgetResume(ctx context.Context, cfg crashloop.BudgetConfig, key string, now time.Time) (ev crashloop.Event, ok bool, err error) {
	r, err := k.run(ctx, "budget_resume", k.budgetKeys(key), cfg.Window, now)
	if err != nil || !r.flag(0) {
		return crashloop.Event{}, false, err
	}
	return crashloop.Event{Kind: crashloop.EventResumed, Key: key, Time: fromMicros(r.int(1)), Reason: r.str(2),
		LastError: decodeCause(r.str(3)), Limit: cfg.MaxRespawns, Window: cfg.Window}, true, nil
}

// budgetSettle clears the window of key unless it is parked: a healthy run.
func (k *kernel) budgetSettle(ctx context.Context, key string) error {
	_, err := k.run(ctx, "budget_settle", k.budgetKeys(key), 0, time.Time{})
	return err
}

// budgetForget drops the state of key, parked or not (RespawnBudget.Forget).
func (k *kernel) budgetForget(ctx context.Context, cfg crashloop.BudgetConfig, key string) error {
	_, err := k.run(ctx, "budget_forget", k.budgetKeys(key), cfg.Window, time.Time{})
	return err
}

// linearBackoff is the budget's own curve, min(InitialBackoff*attempt,
// MaxBackoff), as the library computes it.
func linearBackoff(cfg crashloop.BudgetConfig, attempt int) time.Duration {
	return crashloop.Linear(cfg.InitialBackoff, cfg.MaxBackoff).Delay(attempt, 0)
}

// chainDecision is the outcome of a rescue (ChainDetector.RescueAt).
type chainDecision struct {
	now         time.Time
	chain       int    // the chain after the rescue, or the full chain that escalated
	needsHuman  bool   // the key is marked needs-human (by this call or before): the rescue is refused
	markedNow   bool   // this call marked it: it announces the escalation
	incarnation string // needsHuman: the incarnation whose chain escalated
}

// chainRescue asks to rescue key, whose live incarnation is incarnation, at
// now; reactive is true for a rescue forced by a crash.
func (k *kernel) chainRescue(ctx context.Context, cfg crashloop.ChainConfig, key, incarnation string, reactive bool, now time.Time) (chainDecision, error) {
	r, err := k.run(ctx, "chain_rescue", k.chainKeys(key), cfg.ResetGap, now, cfg.MaxChain, micros(cfg.ResetGap), incarnation, boolArg(reactive))
	if err != nil {
		return chainDecision{}, err
	}
	d := chainDecision{now: fromMicros(r.int(1)), chain: int(r.int(2))}
	switch r.int(0) {
	case 1:
		d.needsHuman, d.markedNow, d.incarnation = true, true, incarnation
	case 2:
		d.needsHuman, d.incarnation = true, r.str(3)
	}
	return d, nil
}

// events returns what the in-memory detector announces for d.
func (d chainDecision) events(key string, cfg crashloop.ChainConfig) []crashloop.Event {
	if !d.markedNow {
		return nil
	}
	return []crashloop.Event{{Kind: crashloop.EventChainEscalated, Key: key, Incarnation: d.incarnation, Time: d.now,
		Reason: chainReason(d.chain), Attempts: d.chain, Limit: cfg.MaxChain, Window: cfg.ResetGap}}
}

// chainView returns the chain of incarnation under key ending at now
// (ChainDetector.ChainAt).
func (k *kernel) chainView(ctx context.Context, cfg crashloop.ChainConfig, key, incarnation string, now time.Time) (int, error) {
	r, err := k.run(ctx, "chain_view", k.chainKeys(key), cfg.ResetGap, now, micros(cfg.ResetGap), incarnation)
	return int(r.int(0)), err
}

// chainMarked reports whether key is marked needs-human.
func (k *kernel) chainMarked(ctx context.Context, key string) (bool, error) {
	r, err := k.run(ctx, "chain_marked", k.chainKeys(key), 0, time.Time{})
	return r.flag(0), err
}

// chainClear forgets the chain and the mark of key (ChainDetector.Clear).
func (k *kernel) chainClear(ctx context.Context, cfg crashloop.ChainConfig, key string) error {
	_, err := k.run(ctx, "chain_clear", k.chainKeys(key), cfg.ResetGap, time.Time{})
	return err
}

// guardDecision is the outcome of a restart seen by a RestartLoopGuard.
type guardDecision struct {
	now        time.Time
	tripped    bool // the window holds MaxRestarts restarts or more
	trippedNow bool // this restart tripped it: it announces the trip
	restarts   int  // restarts in the window
}

// guardRecord records a restart on the guard name at now
// (RestartLoopGuard.RecordAt).
func (k *kernel) guardRecord(ctx context.Context, cfg crashloop.GuardConfig, name string, now time.Time) (guardDecision, error) {
	r, err := k.run(ctx, "guard_record", []string{k.keys.guard(name)}, cfg.Window, now, micros(cfg.Window), cfg.MaxRestarts)
	if err != nil {
		return guardDecision{}, err
	}
	return guardDecision{tripped: r.flag(0), trippedNow: r.flag(1), restarts: int(r.int(2)), now: fromMicros(r.int(3))}, nil
}

// events returns what the in-memory guard announces for d.
func (d guardDecision) events(name string, cfg crashloop.GuardConfig) []crashloop.Event {
	if !d.trippedNow {
		return nil
	}
	return []crashloop.Event{{Kind: crashloop.EventGuardTripped, Key: name, Time: d.now, Reason: guardReason(cfg),
		Attempts: d.restarts, Limit: cfg.MaxRestarts, Window: cfg.Window}}
}

// guardView returns the restarts in the window of the guard name at now
// (RestartLoopGuard.RestartsAt; TrippedAt is restarts >= MaxRestarts).
func (k *kernel) guardView(ctx context.Context, cfg crashloop.GuardConfig, name string, now time.Time) (int, error) {
	r, err := k.run(ctx, "guard_view", []string{k.keys.guard(name)}, cfg.Window, now, micros(cfg.Window))
	return int(r.int(0)), err
}

// guardReset clears the window of the guard name (RestartLoopGuard.Reset).
func (k *kernel) guardReset(ctx context.Context, name string) error {
	_, err := k.run(ctx, "guard_reset", []string{k.keys.guard(name)}, 0, time.Time{})
	return err
}

// fleetDecision is the outcome of a call on a fleet breaker.
type fleetDecision struct {
	now                      time.Time
	tripped                  bool // tripped (by this call or before) and cooling down
	rearmed                  bool // this call re-armed it: it announces the re-arm first
	rearmFailing, rearmTotal int  // the fleet state the re-arm announces (as last noted)
	trippedNow               bool // this call tripped it: it announces the trip
	restarts                 int  // trippedNow: restarts in the hour at the trip
	tripFailing, tripTotal   int  // the fleet state the trip announces
}

func (k *kernel) fleetRun(ctx context.Context, op string, cfg crashloop.FleetConfig, name string, now time.Time, args ...any) (reply, error) {
	argv := append([]any{cfg.RestartsPerHour, microsUp(cfg.Cooldown)}, args...)
	return k.run(ctx, op, []string{k.keys.fleet(name)}, time.Hour, now, argv...)
}

// fleetOutcome reads the reply common to the fleet operations.
func fleetOutcome(r reply) fleetDecision {
	d := fleetDecision{tripped: r.flag(0), rearmed: r.flag(1), trippedNow: r.flag(2), restarts: int(r.int(3)),
		rearmFailing: int(r.int(4)), rearmTotal: int(r.int(5)), now: fromMicros(r.int(6))}
	d.tripFailing, d.tripTotal = d.rearmFailing, d.rearmTotal
	return d
}

// fleetRestart records a restart of any member at now
// (FleetSupervisionPolicy.NoteRestartAt).
func (k *kernel) fleetRestart(ctx context.Context, cfg crashloop.FleetConfig, name string, now time.Time) (fleetDecision, error) {
	r, err := k.fleetRun(ctx, "fleet_restart", cfg, name, now)
	if err != nil {
		return fleetDecision{}, err
	}
	return fleetOutcome(r), nil
}

// fleetState notes that failing of total members of replica are failing at
// now (FleetSupervisionPolicy.NoteFleetStateAt, with the fleet state summed
// over replicas): negative counts are read as 0 and failing is capped at
// total, as in memory. The replica's report replaces its previous one and
// counts until it is older than lifetime (0: forever); the breaker judges the
// sum of the live reports. One replica ("") whose report lives forever is
// the library's policy exactly.
func (k *kernel) fleetState(ctx context.Context, cfg crashloop.FleetConfig, name, replica string, failing, total int, lifetime time.Duration, now time.Time) (fleetDecision, error) {
	total = max(total, 0)
	failing = min(max(failing, 0), total)
	r, err := k.fleetRun(ctx, "fleet_state", cfg, name, now, strconv.FormatFloat(cfg.FailingFraction, 'g', -1, 64),
		cfg.MinFailing, replica, failing, total, micros(lifetime))
	if err != nil {
		return fleetDecision{}, err
	}
	d := fleetOutcome(r)
	d.tripFailing, d.tripTotal = int(r.int(7)), int(r.int(8))
	return d, nil
}

// fleetTripped reports whether the breaker is tripped at now, re-arming it
// when its cooldown has ended (FleetSupervisionPolicy.TrippedAt).
func (k *kernel) fleetTripped(ctx context.Context, cfg crashloop.FleetConfig, name string, now time.Time) (fleetDecision, error) {
	r, err := k.fleetRun(ctx, "fleet_tripped", cfg, name, now)
	if err != nil {
		return fleetDecision{}, err
	}
	return fleetOutcome(r), nil
}

// fleetStatus returns the breaker's status at now, re-arming it first when
// its cooldown has ended (FleetSupervisionPolicy.StatusAt).
func (k *kernel) fleetStatus(ctx context.Context, cfg crashloop.FleetConfig, name string, now time.Time) (crashloop.FleetStatus, fleetDecision, error) {
	r, err := k.fleetRun(ctx, "fleet_status", cfg, name, now)
	if err != nil {
		return crashloop.FleetStatus{}, fleetDecision{}, err
	}
	d := fleetOutcome(r)
	st := crashloop.FleetStatus{BreakerTripped: d.tripped, FleetRestartsPerHour: cfg.RestartsPerHour,
		FailingChannels: d.rearmFailing, TotalChannels: d.rearmTotal, RestartsInHour: int(r.int(7))}
	if d.tripped {
		at := fromMicros(r.int(8)).Add(cfg.Cooldown)
		st.RearmAt = &at
	}
	return st, d, nil
}

// fleetReset clears the hour, the noted state and any trip
// (FleetSupervisionPolicy.Reset).
func (k *kernel) fleetReset(ctx context.Context, cfg crashloop.FleetConfig, name string) error {
	_, err := k.fleetRun(ctx, "fleet_reset", cfg, name, time.Time{})
	return err
}

// events returns what the in-memory breaker announces for d, in its order:
// the re-arm, then the trip.
func (d fleetDecision) events(name string, cfg crashloop.FleetConfig) []crashloop.Event {
	var evs []crashloop.Event
	if d.rearmed {
		evs = append(evs, fleetEvent(crashloop.EventFleetRearmed, name, cfg, d.now, 0, d.rearmFailing, d.rearmTotal))
	}
	if d.trippedNow {
		evs = append(evs, fleetEvent(crashloop.EventFleetTripped, name, cfg, d.now, d.restarts, d.tripFailing, d.tripTotal))
	}
	return evs
}

func fleetEvent(kind crashloop.EventKind, name string, cfg crashloop.FleetConfig, now time.Time, restarts, failing, total int) crashloop.Event {
	return crashloop.Event{Kind: kind, Key: name, Time: now, Reason: fleetReason(failing, total),
		Attempts: restarts, Limit: cfg.RestartsPerHour, Window: cfg.Cooldown, Failing: failing, Total: total}
}
