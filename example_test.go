package crashloop_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/crashloopguard/crashloop"
)

// A session whose adapter binary is missing fails on every start. The budget
// grants three respawns with a growing backoff, then parks the session until
// an operator resumes it.
func ExampleRespawnBudget() {
	clk := clock.NewMock() // a real program omits WithClock
	budget, err := crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(),
		crashloop.WithClock(clk),
		crashloop.WithEventHandler(crashloop.EventHandlerFunc(func(ev crashloop.Event) {
			if ev.Kind != crashloop.EventRespawnScheduled {
				fmt.Printf("event %s: key=%s reason=%s\n", ev.Kind, ev.Key, ev.Reason)
			}
		})),
	)
	if err != nil {
		panic(err)
	}

	errMissing := errors.New("adapter binary not found")
	for {
		if err := budget.Spawn("session-42"); err != nil { // the first spawn is free
			fmt.Println("spawn refused:", err)
			break
		}
		// ... start the session; it fails at once ...
		backoff, err := budget.Failed("session-42", errMissing)
		if err != nil {
			fmt.Println("parked:", errors.Is(err, crashloop.ErrParked))
			continue
		}
		fmt.Println("respawn in", backoff)
		clk.Add(backoff)
	}
	fmt.Println("parked sessions:", budget.Parked())

	// After fixing the cause, the operator resumes it with a full budget.
	if err := budget.Resume("session-42"); err != nil {
		panic(err)
	}
	backoff, _ := budget.Failed("session-42", errMissing)
	fmt.Println("after resume, respawn in", backoff)

	// Output:
	// respawn in 500ms
	// respawn in 1s
	// respawn in 1.5s
	// event agent.startup_exhausted: key=session-42 reason=respawn_budget_exhausted
	// parked: true
	// spawn refused: crashloop: key "session-42" is parked (respawn_budget_exhausted after 3 respawns; resume it once the cause is fixed): adapter binary not found
	// parked sessions: [session-42]
	// event agent.resumed: key=session-42 reason=respawn_budget_exhausted
	// after resume, respawn in 500ms
}

// A budget whose backoffs outlast its window can never park: by the time the
// last respawn is due, the first has aged out. Such a configuration is
// rejected.
func ExampleNewRespawnBudget_neverParks() {
	_, err := crashloop.NewRespawnBudget(crashloop.BudgetConfig{
		MaxRespawns:    5,
		Window:         10 * time.Second,
		InitialBackoff: 10 * time.Second,
		MaxBackoff:     10 * time.Second,
	})
	var cfgErr *crashloop.ConfigError
	if errors.As(err, &cfgErr) {
		fmt.Println("field:", cfgErr.Field)
	}
	fmt.Println(err)
	// Output:
	// field: window
	// crashloop: invalid configuration: window = 10s: must be >= the sum of the first 5 backoffs (50s), or a crash loop never parks
}

// A worker seat with bad credentials respawns, passes its health check, and
// dies sixteen minutes later, every time. A one-hour restart window would
// never notice; the chain detector counts consecutive reactive rescues, each
// within 20 minutes of the last, and hands the seat to a human on the fourth
// crash.
func ExampleChainDetector() {
	detector, err := crashloop.NewChainDetector(crashloop.DefaultChainConfig(),
		crashloop.WithEventHandler(crashloop.EventHandlerFunc(func(ev crashloop.Event) {
			fmt.Printf("event %s: %s (reason=%s, chain %d)\n", ev.Kind, ev.Key, ev.Reason, ev.Attempts)
		})),
	)
	if err != nil {
		panic(err)
	}

	start := time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)
	for crash := 0; crash < 4; crash++ {
		now := start.Add(time.Duration(crash) * 16 * time.Minute)
		chain, err := detector.RescueAt("seat-7", "session-a1", true, now)
		if errors.Is(err, crashloop.ErrNeedsHuman) {
			fmt.Println(now.Format("15:04"), "gave up:", err)
			break
		}
		fmt.Println(now.Format("15:04"), "rescued, chain", chain)
	}
	fmt.Println("needs a human:", detector.NeedsHuman())

	// A fresh process on the reused seat has a new session id: after the
	// operator clears the seat, its chain starts from scratch.
	detector.Clear("seat-7")
	chain, _ := detector.RescueAt("seat-7", "session-b2", true, start.Add(2*time.Hour))
	fmt.Println("new incarnation, chain", chain)

	// Output:
	// 09:00 rescued, chain 1
	// 09:16 rescued, chain 2
	// 09:32 rescued, chain 3
	// event rescue.needs_human: seat-7 (reason=needs_human, chain 3)
	// 09:48 gave up: crashloop: "seat-7" needs a human: crash-loop: gave up after 3 reactive rescues
	// needs a human: [seat-7]
	// event agent.resumed: seat-7 (reason=needs_human, chain 3)
	// new incarnation, chain 1
}

// A channel that crashes on resume restarts in a tight loop. The guard trips
// on the third restart within 60 seconds; a clean run resets it.
func ExampleRestartLoopGuard() {
	clk := clock.NewMock()
	guard, err := crashloop.NewRestartLoopGuard(3, 60*time.Second,
		crashloop.WithName("telegram"),
		crashloop.WithClock(clk),
		crashloop.WithEventHandler(crashloop.EventHandlerFunc(func(ev crashloop.Event) {
			fmt.Printf("event %s: %s reason=%s (%d restarts in %s)\n", ev.Kind, ev.Key, ev.Reason, ev.Attempts, ev.Window)
		})),
	)
	if err != nil {
		panic(err)
	}

	for i := 1; i <= 3; i++ {
		fmt.Printf("restart %d: tripped=%v\n", i, guard.Record())
		clk.Add(5 * time.Second)
	}

	// A minute of quiet drains the window.
	clk.Add(time.Minute)
	fmt.Println("a minute later: tripped =", guard.Tripped())

	// A supervised run that returns normally clears the history.
	guard.Record()
	guard.Reset()
	fmt.Println("after a clean run:", guard.Restarts(), "restarts")

	// Output:
	// restart 1: tripped=false
	// restart 2: tripped=false
	// event channel.crash_loop_tripped: telegram reason=restart_loop_guard (3 restarts in 1m0s)
	// restart 3: tripped=true
	// a minute later: tripped = false
	// after a clean run: 0 restarts
}

// A systemic fault (an expired org-wide token) makes half the fleet fail at
// once. The fleet breaker trips once, holds every restart for its cooldown,
// and then re-arms on its own with a clean hour.
func ExampleFleetSupervisionPolicy() {
	clk := clock.NewMock()
	clk.Set(time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC))
	fleet, err := crashloop.NewFleetSupervisionPolicy(crashloop.DefaultFleetConfig(),
		crashloop.WithName("gateway"),
		crashloop.WithClock(clk),
		crashloop.WithEventHandler(crashloop.EventHandlerFunc(func(ev crashloop.Event) {
			fmt.Printf("event %s: reason=%s (%d/%d failing)\n", ev.Kind, ev.Reason, ev.Failing, ev.Total)
		})),
	)
	if err != nil {
		panic(err)
	}

	// One failing channel is the per-channel guards' job.
	fmt.Println("1 of 4 failing, tripped:", fleet.NoteFleetState(1, 4))
	// Two of four is half the fleet.
	fmt.Println("2 of 4 failing, tripped:", fleet.NoteFleetState(2, 4))

	// While tripped, restarts are held (and not counted).
	clk.Add(time.Minute)
	fmt.Println("restart held:", fleet.NoteRestart())

	status, _ := json.Marshal(fleet.Status())
	fmt.Println(string(status))

	// Two minutes after the trip the breaker re-arms.
	clk.Add(time.Minute)
	fmt.Println("tripped after the cooldown:", fleet.Tripped())

	// Output:
	// 1 of 4 failing, tripped: false
	// event fleet.breaker_tripped: reason=fleet_failing_fraction (2/4 failing)
	// 2 of 4 failing, tripped: true
	// restart held: true
	// {"breaker_tripped":true,"fleet_restarts_per_hour":40,"failing_keys":2,"keys":4,"restarts_in_hour":0,"rearm_at":"2026-03-01T09:02:00Z"}
	// event fleet.breaker_rearmed: reason=fleet_failing_fraction (2/4 failing)
	// tripped after the cooldown: false
}
