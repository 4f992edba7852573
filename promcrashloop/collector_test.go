package promcrashloop_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/promcrashloop"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollectorFollowsSupervisor drives a real Supervisor on a mock clock
// through a failing start, a park, a resume, a fleet trip and the re-arm,
// and checks every series of both collectors after each step. The
// synctest bubble only tells when the Run goroutines are waiting on the
// mock clock; all time comes from the mock.
func TestCollectorFollowsSupervisor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mock := mockAt()
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.Budget = crashloop.BudgetConfig{MaxRespawns: 2, Window: time.Minute, InitialBackoff: time.Second, MaxBackoff: time.Second}
		cfg.Fleet = &crashloop.FleetConfig{RestartsPerHour: 3, FailingFraction: 0.5, MinFailing: 2, Cooldown: 2 * time.Minute}
		var events promcrashloop.Events
		sup, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mock), crashloop.WithEventHandler(&events))
		if err != nil {
			t.Fatal(err)
		}
		c := promcrashloop.NewCollector(sup)
		check := func(step string, want series) {
			t.Helper()
			if d := diff(collect(t, c, &events), complete(want)); d != "" {
				t.Errorf("%s:\n%s", step, d)
			}
		}

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		refused := errors.New("connection refused")
		aDone := make(chan error, 1)
		go func() {
			aDone <- sup.Run(ctx, "a", func(context.Context) error { return refused })
		}()
		synctest.Wait() // a failed at once; its restart, counted, waits out the 1s backoff
		check("a failed its first start", series{
			`crashloop_restarts_total{key="a"}`:                      1,
			`crashloop_key_state{key="a",state="backoff"}`:           1,
			`crashloop_fleet_breaker_tripped`:                        0,
			`crashloop_fleet_restarts_in_hour`:                       1,
			`crashloop_fleet_failing_keys`:                           0,
			`crashloop_fleet_keys`:                                   1,
			`crashloop_events_total{kind="agent.respawn_scheduled"}`: 1,
		})

		mock.Add(time.Second) // the restart fails again
		synctest.Wait()
		mock.Add(time.Second) // the last restart; its failure parks a
		synctest.Wait()
		if err := <-aDone; !errors.Is(err, crashloop.ErrParked) {
			t.Fatalf("Run(a) = %v, want parked", err)
		}
		check("a parked", series{
			`crashloop_restarts_total{key="a"}`:                           2,
			`crashloop_key_state{key="a",state="parked"}`:                 1,
			`crashloop_parked{key="a",reason="respawn_budget_exhausted"}`: 1,
			`crashloop_parked_since_timestamp_seconds{key="a"}`:           float64(t0.Unix() + 2), // parked 2s in
			`crashloop_fleet_breaker_tripped`:                             0,
			`crashloop_fleet_restarts_in_hour`:                            2,
			`crashloop_fleet_failing_keys`:                                1,
			`crashloop_fleet_keys`:                                        1,
			`crashloop_events_total{kind="agent.respawn_scheduled"}`:      2,
			`crashloop_events_total{kind="agent.startup_exhausted"}`:      1,
		})

		if err := sup.Resume(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		check("a resumed", series{
			`crashloop_restarts_total{key="a"}`:                      0,
			`crashloop_key_state{key="a",state="exited"}`:            1,
			`crashloop_fleet_breaker_tripped`:                        0,
			`crashloop_fleet_restarts_in_hour`:                       2,
			`crashloop_fleet_failing_keys`:                           0,
			`crashloop_fleet_keys`:                                   0, // an exited key is no fleet member
			`crashloop_events_total{kind="agent.respawn_scheduled"}`: 2,
			`crashloop_events_total{kind="agent.startup_exhausted"}`: 1,
			`crashloop_events_total{kind="agent.resumed"}`:           1,
		})

		starts := 0
		bDone := make(chan error, 1)
		go func() {
			bDone <- sup.Run(ctx, "b", func(ctx context.Context) error {
				starts++
				if starts == 1 {
					return refused
				}
				<-ctx.Done() // the second start stays up
				return ctx.Err()
			})
		}()
		synctest.Wait()       // b failed its first start and waits out its backoff
		mock.Add(time.Second) // b's restart is the fleet's 3rd in the hour: tripped, held
		synctest.Wait()
		check("b held by the tripped fleet breaker", series{
			`crashloop_restarts_total{key="a"}`:                      0,
			`crashloop_key_state{key="a",state="exited"}`:            1,
			`crashloop_restarts_total{key="b"}`:                      1,
			`crashloop_key_state{key="b",state="held"}`:              1,
			`crashloop_fleet_breaker_tripped`:                        1,
			`crashloop_fleet_restarts_in_hour`:                       3,
			`crashloop_fleet_failing_keys`:                           0,
			`crashloop_fleet_keys`:                                   1,
			`crashloop_events_total{kind="agent.respawn_scheduled"}`: 3,
			`crashloop_events_total{kind="agent.startup_exhausted"}`: 1,
			`crashloop_events_total{kind="agent.resumed"}`:           1,
			`crashloop_events_total{kind="fleet.breaker_tripped"}`:   1,
		})

		mock.Add(2 * time.Minute) // the cooldown ends: re-armed, b restarts
		synctest.Wait()
		check("fleet re-armed, b running", series{
			`crashloop_restarts_total{key="a"}`:                      0,
			`crashloop_key_state{key="a",state="exited"}`:            1,
			`crashloop_restarts_total{key="b"}`:                      1,
			`crashloop_key_state{key="b",state="running"}`:           1,
			`crashloop_fleet_breaker_tripped`:                        0,
			`crashloop_fleet_restarts_in_hour`:                       0,
			`crashloop_fleet_failing_keys`:                           0,
			`crashloop_fleet_keys`:                                   1,
			`crashloop_events_total{kind="agent.respawn_scheduled"}`: 3,
			`crashloop_events_total{kind="agent.startup_exhausted"}`: 1,
			`crashloop_events_total{kind="agent.resumed"}`:           1,
			`crashloop_events_total{kind="fleet.breaker_tripped"}`:   1,
			`crashloop_events_total{kind="fleet.breaker_rearmed"}`:   1,
		})

		cancel()
		if err := <-bDone; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run(b) = %v, want context.Canceled", err)
		}
		if starts != 2 {
			t.Errorf("b started %d times, want 2", starts)
		}
	})
}

// TestCollectorMaxKeys checks the key cap: parked keys first, then the
// keys with the most restarts, then by name; crashloop_keys still counts
// every key; and a cap of 0 leaves no series with a key label.
func TestCollectorMaxKeys(t *testing.T) {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil
	sup, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt()))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "b", "c"} {
		if err := sup.Run(context.Background(), key, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	park(t, sup, "z")

	got := collect(t, promcrashloop.NewCollector(sup, promcrashloop.WithMaxKeys(2)))
	want := complete(series{
		`crashloop_restarts_total{key="a"}`:                  0,
		`crashloop_key_state{key="a",state="exited"}`:        1,
		`crashloop_restarts_total{key="z"}`:                  0,
		`crashloop_key_state{key="z",state="parked"}`:        1,
		`crashloop_parked{key="z",reason="permanent_error"}`: 1,
		`crashloop_parked_since_timestamp_seconds{key="z"}`:  float64(t0.Unix()),
	}).without("crashloop_events_total")
	want[`crashloop_keys{state="exited"}`] = 3 // b and c too
	if d := diff(got, want); d != "" {
		t.Errorf("WithMaxKeys(2):\n%s", d)
	}

	got = collect(t, promcrashloop.NewCollector(sup, promcrashloop.WithMaxKeys(0)))
	want = complete(series{}).without("crashloop_events_total")
	want[`crashloop_keys{state="exited"}`] = 3
	want[`crashloop_keys{state="parked"}`] = 1
	if d := diff(got, want); d != "" {
		t.Errorf("WithMaxKeys(0):\n%s", d)
	}

	if n := testutil.CollectAndCount(promcrashloop.NewCollector(sup, promcrashloop.WithMaxKeys(-1)), "crashloop_key_state"); n != 4 {
		t.Errorf("WithMaxKeys(-1): %d crashloop_key_state series, want 4 (no cap)", n)
	}
}

// TestCollectorForget checks that a key the Supervisor forgets has no
// series from the next scrape on, parked or not.
func TestCollectorForget(t *testing.T) {
	sup := parkedSupervisor(t, 2)
	c := promcrashloop.NewCollector(sup)
	if err := sup.Forget(context.Background(), "key-00000"); err != nil {
		t.Fatal(err)
	}
	want := complete(series{
		`crashloop_restarts_total{key="key-00001"}`:                  0,
		`crashloop_key_state{key="key-00001",state="parked"}`:        1,
		`crashloop_parked{key="key-00001",reason="permanent_error"}`: 1,
		`crashloop_parked_since_timestamp_seconds{key="key-00001"}`:  float64(t0.Unix()),
	}).without("crashloop_events_total")
	if d := diff(collect(t, c), want); d != "" {
		t.Error(d)
	}
}

// TestCollectorKeyNotUTF8 checks that a key that is not valid UTF-8 (keys
// are any string) is exported with U+FFFD for its bad bytes instead of
// failing the scrape.
func TestCollectorKeyNotUTF8(t *testing.T) {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil
	sup, err := crashloop.NewSupervisor(cfg, crashloop.WithClock(mockAt()))
	if err != nil {
		t.Fatal(err)
	}
	park(t, sup, "job-\xff")
	got := collect(t, promcrashloop.NewCollector(sup)).only("crashloop_parked")
	want := series{
		"crashloop_parked{key=\"job-\uFFFD\",reason=\"permanent_error\"}": 1,
		"crashloop_parked_since_timestamp_seconds{key=\"job-\uFFFD\"}":    float64(t0.Unix()),
	}
	if d := diff(got, want); d != "" {
		t.Error(d)
	}
}

// TestCollectorLint runs client_golang's linter (the checks of promtool
// check metrics) over every series a Collector and an Events export.
func TestCollectorLint(t *testing.T) {
	sup := parkedSupervisor(t, 1)
	for _, c := range []prometheus.Collector{promcrashloop.NewCollector(sup), &promcrashloop.Events{}} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

// TestScrapeHoldsNoLock stops a scrape in the middle of its series (its
// channel is not read) and checks that the Supervisor still decides:
// Resume, Run and Status all return while the scrape waits.
func TestScrapeHoldsNoLock(t *testing.T) {
	sup := parkedSupervisor(t, 3)
	ch := make(chan prometheus.Metric)
	go func() {
		promcrashloop.NewCollector(sup).Collect(ch)
		close(ch)
	}()
	<-ch // the scrape has read the Status and is writing its series

	decided := make(chan struct{})
	go func() {
		defer close(decided)
		if err := sup.Resume(context.Background(), "key-00001"); err != nil {
			t.Error(err)
		}
		park(t, sup, "key-00001")
		if n := len(sup.Status(context.Background()).Keys); n != 3 {
			t.Errorf("Status has %d keys, want 3", n)
		}
	}()
	select {
	case <-decided:
	case <-time.After(time.Minute): // a watchdog: fires only if the Supervisor waits for the scrape
		t.Fatal("the Supervisor waited for a scrape that was writing its series")
	}
	for range ch { // let the scrape finish
	}
}
