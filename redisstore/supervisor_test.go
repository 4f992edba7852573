package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/eventrec"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Supervisors sharing one deployment on a real redis-server, as replicas
// of a service run them: crashloop.NewSharedSupervisor on a Store each.

// events records the events of one Supervisor (internal/eventrec); it is
// safe for concurrent use.
type events struct {
	eventrec.Recorder[crashloop.Event]
}

// of returns the events of kind.
func (e *events) of(kind crashloop.EventKind) []crashloop.Event {
	return e.Filter(func(ev crashloop.Event) bool { return ev.Kind == kind })
}

// replica is one Supervisor of a test, with its Store, events and clock
// (a mock clock in client-time tests, nil for the real one).
type replica struct {
	sup   *crashloop.Supervisor
	store *Store
	evs   *events
	clock *clock.Mock
}

// fleet starts n Supervisors with cfg, each on a Store of its own built by
// newStore (for replica i) on one deployment. With mock, each gets a mock
// clock at start (and the Stores should decide in client time).
func fleet(t *testing.T, n int, cfg crashloop.SupervisorConfig, mock bool, newStore func(i int) *Store) []*replica {
	t.Helper()
	var out []*replica
	for i := range n {
		r := &replica{store: newStore(i), evs: &events{}}
		t.Cleanup(func() { _ = r.store.Close() })
		opts := []crashloop.Option{crashloop.WithEventHandler(r.evs), crashloop.WithName(fmt.Sprintf("fleet-%d", i))}
		if mock {
			r.clock = clock.NewMock()
			r.clock.Set(start)
			opts = append(opts, crashloop.WithClock(r.clock))
		}
		sup, err := newShared(cfg, r.store, opts...)
		require.NoError(t, err)
		r.sup = sup
		out = append(out, r)
	}
	return out
}

// start is the mock clocks' time: whole microseconds.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// onServer returns a newStore for fleet: Stores of one fresh deployment on
// s with options o (each its own client and Replica).
func onServer(t testing.TB, s *redistest.Server, o Options) func(int) *Store {
	if o.Prefix == "" {
		o.Prefix = newPrefix()
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	return func(i int) *Store {
		o := o
		o.Replica = fmt.Sprintf("replica-%d", i)
		return New(testClient(t, s), o)
	}
}

func count(rs []*replica, kind crashloop.EventKind) int {
	n := 0
	for _, r := range rs {
		n += len(r.evs.of(kind))
	}
	return n
}

// Three Supervisors failing one key at once spend one budget: MaxRespawns
// respawns between them, then one park, announced once, by the replica
// whose step made it (with its own error); the others are refused.
func TestExactlyOneParkFleetWide(t *testing.T) {
	s := redistest.Start(t)
	cfg := crashloop.DefaultSupervisorConfig()
	rs := fleet(t, 3, cfg, false, onServer(t, s, Options{}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	restarts := 0
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			boom := fmt.Errorf("replica %d: exit 1", i)
			for range 10 {
				d := r.sup.Decide(context.Background(), "shared", crashloop.RunResult{Err: boom})
				mu.Lock()
				if d.Action != crashloop.ActionStop {
					restarts++
				} else if !errors.Is(d.Err, crashloop.ErrParked) {
					t.Errorf("replica %d: %+v", i, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, cfg.Budget.MaxRespawns, restarts)
	require.Equal(t, 1, count(rs, crashloop.EventStartupExhausted))
	for i, r := range rs {
		if evs := r.evs.of(crashloop.EventStartupExhausted); len(evs) == 1 {
			require.ErrorContains(t, evs[0].LastError, fmt.Sprintf("replica %d: exit 1", i), "announced with the error of the replica that parked it")
			require.Equal(t, cfg.Budget.MaxRespawns, evs[0].Attempts)
		}
		require.Equal(t, []string{"shared"}, r.sup.Parked(), "replica %d", i)
		require.ErrorIs(t, r.sup.Run(context.Background(), "shared", func(context.Context) error { return nil }), crashloop.ErrParked)
	}
}

// The fleet breaker counts the restarts of every replica in one hour,
// trips once and re-arms once between them all.
func TestFleetBreakerFleetWide(t *testing.T) {
	s := redistest.Start(t)
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = &crashloop.FleetConfig{RestartsPerHour: 6, FailingFraction: 1, MinFailing: 100, Cooldown: time.Minute}
	rs := fleet(t, 3, cfg, true, onServer(t, s, Options{ClientTime: true}))
	planned := crashloop.RunResult{Err: crashloop.Restart(errors.New("config reload"))}
	for i := range 5 {
		d := rs[i%3].sup.Decide(context.Background(), fmt.Sprintf("k%d", i), planned)
		require.Equal(t, crashloop.ActionRestart, d.Action)
	}
	for i, r := range rs {
		st := r.sup.Status(context.Background())
		require.Equal(t, 5, st.Fleet.RestartsInHour, "replica %d sees every replica's restarts", i)
		require.False(t, st.Fleet.BreakerTripped)
	}
	d := rs[2].sup.Decide(context.Background(), "k5", planned) // the 6th restart of the hour
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionHold, Wait: time.Minute}, d)
	d = rs[0].sup.Decide(context.Background(), "k6", planned)
	require.Equal(t, crashloop.ActionHold, d.Action, "a tripped breaker holds every replica's restarts")
	require.Equal(t, 1, count(rs, crashloop.EventFleetTripped))
	require.Len(t, rs[2].evs.of(crashloop.EventFleetTripped), 1, "announced by the replica whose restart tripped it")
	trip := rs[2].evs.of(crashloop.EventFleetTripped)[0]
	require.Equal(t, []any{crashloop.ReasonFleetRestartRate, 6}, []any{trip.Reason, trip.Attempts}, "the code, and the restarts in the hour")

	var wg sync.WaitGroup
	for i, r := range rs {
		r.clock.Add(time.Minute)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.sup.Proceed(context.Background(), []string{"k5", "k6", "k5"}[i])
		}()
	}
	wg.Wait()
	require.Equal(t, 1, count(rs, crashloop.EventFleetRearmed), "one re-arm between three replicas asking at once")
	for i, r := range rs {
		require.False(t, r.sup.Status(context.Background()).Fleet.BreakerTripped, "replica %d", i)
	}
}

// fleetState is the fleet breaker as replica r's Supervisor reports it.
func fleetState(r *replica) string {
	st := r.sup.Status(context.Background()).Fleet
	return fmt.Sprintf("tripped=%v %d/%d", st.BreakerTripped, st.FailingKeys, st.Keys)
}

// fractionConfig trips the fleet breaker at half the keys failing, at
// least 2, and on no rate that the tests reach.
func fractionConfig() crashloop.SupervisorConfig {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Chain = nil
	cfg.Fleet = &crashloop.FleetConfig{RestartsPerHour: 100, FailingFraction: 0.5, MinFailing: 2, Cooldown: time.Hour}
	return cfg
}

// Three replicas on the same four keys count four keys, not twelve: two
// parked are half the fleet, and trip the breaker, as in one Supervisor.
func TestFailingFractionCountsKeysOnce(t *testing.T) {
	s := redistest.Start(t)
	rs := fleet(t, 3, fractionConfig(), true, onServer(t, s, Options{ClientTime: true}))
	boom := crashloop.RunResult{Err: errors.New("boom")}
	for _, r := range rs {
		for _, key := range []string{"a", "b", "c", "d"} {
			require.Equal(t, crashloop.ActionRestart, r.sup.Decide(context.Background(), key, boom).Action)
		}
	}
	for i, r := range rs {
		require.Eventually(t, func() bool { return fleetState(r) == "tripped=false 0/4" }, watchdog, time.Millisecond,
			"replica %d: %s", i, fleetState(r))
	}
	fatal := crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))}
	require.ErrorIs(t, rs[0].sup.Decide(context.Background(), "a", fatal).Err, crashloop.ErrParked)
	require.Equal(t, "tripped=false 1/4", fleetState(rs[1]))
	require.ErrorIs(t, rs[1].sup.Decide(context.Background(), "b", fatal).Err, crashloop.ErrParked)
	require.Equal(t, 1, count(rs, crashloop.EventFleetTripped))
	require.Len(t, rs[1].evs.of(crashloop.EventFleetTripped), 1, "announced by the replica whose park tripped it")
	trip := rs[1].evs.of(crashloop.EventFleetTripped)[0]
	require.Equal(t, []any{crashloop.ReasonFleetFailingFraction, 2, 4}, []any{trip.Reason, trip.Failing, trip.Total})
	for i, r := range rs {
		require.Equal(t, "tripped=true 2/4", fleetState(r), "replica %d", i)
	}
}

// The fraction is the deployment's, not the parking replica's: a replica
// whose two keys are parked while another runs four others notes 2 of 6,
// and does not trip. Keys count from the start of their run, before any
// failure; a replica that closes stops counting at once, and one that
// dies once its members expire, while the live ones keep theirs alive.
func TestFailingFractionIsTheDeployments(t *testing.T) {
	s := redistest.Start(t)
	const ttl = 300 * time.Millisecond
	rs := fleet(t, 3, fractionConfig(), true, onServer(t, s, Options{ClientTime: true, MemberTTL: ttl}))
	a, b, c := rs[0], rs[1], rs[2]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(r *replica, keys ...string) {
		for _, key := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = r.sup.Run(ctx, key, func(ctx context.Context) error { <-ctx.Done(); return nil })
			}()
		}
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	run(b, "c", "d", "e", "f")
	run(c, "g")
	boom := crashloop.RunResult{Err: errors.New("boom")}
	for _, key := range []string{"a", "b"} {
		require.Equal(t, crashloop.ActionRestart, a.sup.Decide(context.Background(), key, boom).Action)
	}
	require.Eventually(t, func() bool { return fleetState(a) == "tripped=false 0/7" }, watchdog, time.Millisecond, "%s", fleetState(a))
	fatal := crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))}
	for _, key := range []string{"a", "b"} {
		require.ErrorIs(t, a.sup.Decide(context.Background(), key, fatal).Err, crashloop.ErrParked)
	}
	require.Equal(t, "tripped=false 2/7", fleetState(b), "2 of 7: A alone has 2 of 2")
	require.Zero(t, count(rs, crashloop.EventFleetTripped))

	// While C lives, its Store keeps its members alive, idle or not.
	rdb := s.Client(nil)
	cm := c.store.keys.member("replica-2")
	low := pttl(t, rdb, cm)
	require.Eventually(t, func() bool {
		left := pttl(t, rdb, cm)
		low = min(low, left)
		return left > low+ttl/6
	}, watchdog, 5*time.Millisecond)

	require.NoError(t, b.store.Close()) // B closes: its members are withdrawn
	require.Equal(t, "tripped=false 2/3", fleetState(a))
	c.store.cancel() // C dies: nobody keeps its members alive
	c.store.wg.Wait()
	require.Eventually(t, func() bool { return fleetState(a) == "tripped=false 2/2" }, watchdog, 10*time.Millisecond, "%s", fleetState(a))
	require.Zero(t, rdb.Exists(context.Background(), cm).Val())
}

// A park or a resume made by one replica reaches the others through the
// deployment's notices: Parked and Status change without a decision of
// their own; a Resume on any replica applies to all.
func TestPropagation(t *testing.T) {
	s := redistest.Start(t)
	cfg := crashloop.DefaultSupervisorConfig()
	rs := fleet(t, 3, cfg, false, onServer(t, s, Options{}))
	reconciled(t, rs[0].store, rs[1].store, rs[2].store)
	for _, r := range rs[1:] { // they know the key: it failed there once
		require.Equal(t, crashloop.ActionRestart, r.sup.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("flaky")}).Action)
	}
	start := time.Now()
	rs[0].sup.Decide(context.Background(), "k", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))})
	for i, r := range rs {
		require.Eventually(t, func() bool {
			return len(r.sup.Parked()) == 1 && r.sup.Status(context.Background()).Keys["k"].State == crashloop.StateParked
		}, watchdog, 100*time.Microsecond, "replica %d", i)
	}
	t.Logf("the park reached both other replicas after %v", time.Since(start))

	require.NoError(t, rs[2].sup.Resume(context.Background(), "k"))
	for i, r := range rs {
		require.Eventually(t, func() bool {
			return len(r.sup.Parked()) == 0 && r.sup.Status(context.Background()).Keys["k"].State == crashloop.StateExited
		}, watchdog, 100*time.Microsecond, "replica %d", i)
		require.ErrorIs(t, r.sup.Resume(context.Background(), "k"), crashloop.ErrNotParked, "replica %d", i)
	}
	require.Equal(t, 1, count(rs, crashloop.EventResumed))
	d := rs[1].sup.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("flaky")})
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: cfg.Budget.InitialBackoff}, d, "a full budget again, everywhere")
}

// An operator's Resume from a Store that no Supervisor opened (the
// command's resume --redis) applies to every replica.
func TestOperatorResumeReachesReplicas(t *testing.T) {
	s := redistest.Start(t)
	o := Options{Prefix: newPrefix()}
	rs := fleet(t, 2, crashloop.DefaultSupervisorConfig(), false, onServer(t, s, o))
	reconciled(t, rs[0].store, rs[1].store)
	rs[1].sup.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("flaky")})
	rs[0].sup.Decide(context.Background(), "k", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))})
	require.Eventually(t, func() bool { return len(rs[1].sup.Parked()) == 1 }, watchdog, 100*time.Microsecond)

	op := New(testClient(t, s), o)
	ch, err := op.Lookup(context.Background(), "k")
	require.NoError(t, err)
	pe, _, err := op.Resume(context.Background(), "k", ch.Park.Version, time.Now())
	require.NoError(t, err)
	require.Equal(t, crashloop.ReasonPermanent, pe.Reason)
	for i, r := range rs {
		require.Eventually(t, func() bool { return len(r.sup.Parked()) == 0 }, watchdog, 100*time.Microsecond, "replica %d", i)
	}
}

// Parks survive a killed server with AOF on (appendonly yes, appendfsync
// always): a new replica after the restart refuses the key. Without
// persistence a restarted server has forgotten them.
func TestParksSurviveAKilledServerWithAOF(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []redistest.Option
		refused bool
	}{{"aof", []redistest.Option{redistest.WithAOF(t.TempDir())}, true}, {"no persistence", nil, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t, tc.opts...)
			newStore := onServer(t, s, Options{})
			rs := fleet(t, 1, crashloop.DefaultSupervisorConfig(), false, newStore)
			rs[0].sup.Decide(context.Background(), "k", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))})
			s.Kill()
			s.Restart()
			fresh := fleet(t, 1, crashloop.DefaultSupervisorConfig(), false, newStore)[0]
			err := fresh.sup.Run(context.Background(), "k", func(context.Context) error { return nil })
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, crashloop.ErrParked)
			require.ErrorContains(t, err, "bad config")
			require.Equal(t, []string{"k"}, fresh.sup.Parked())
		})
	}
}

// 8 goroutines in each of 3 Supervisors fail 100 keys until each is
// parked, at the server's time: every key spends one budget, every park is
// announced once, and none is lost.
func TestStress(t *testing.T) {
	s := redistest.Start(t)
	cfg := crashloop.DefaultSupervisorConfig()
	rs := fleet(t, 3, cfg, false, onServer(t, s, Options{}))
	const keys, workers = 100, 8
	var mu sync.Mutex
	granted := map[string]int{}
	var wg sync.WaitGroup
	for ri, r := range rs {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				boom := fmt.Errorf("replica %d worker %d", ri, w)
				for n := range keys {
					key := fmt.Sprintf("key-%03d", (n*7+w*13+ri*31)%keys)
					for {
						d := r.sup.Decide(context.Background(), key, crashloop.RunResult{Err: boom})
						if d.Action == crashloop.ActionStop {
							if !errors.Is(d.Err, crashloop.ErrParked) {
								t.Errorf("%s: %+v", key, d)
							}
							break
						}
						mu.Lock()
						granted[key]++
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	announced := map[string]int{}
	for _, r := range rs {
		for _, ev := range r.evs.of(crashloop.EventStartupExhausted) {
			announced[ev.Key]++
		}
	}
	parks, err := rs[0].store.Parked(context.Background())
	require.NoError(t, err)
	require.Len(t, parks, keys, "no park lost")
	for _, pe := range parks {
		require.Equal(t, cfg.Budget.MaxRespawns, granted[pe.Key], "%s: one budget between every replica", pe.Key)
		require.Equal(t, 1, announced[pe.Key], "%s: announced once", pe.Key)
	}
	require.Len(t, announced, keys)
	for i, r := range rs {
		require.Len(t, r.sup.Parked(), keys, "replica %d", i)
	}
	require.Equal(t, 1, count(rs, crashloop.EventFleetTripped), "the fleet tripped once between them")
}

// On Redis Cluster, through a ClusterClient: every step's keys share the
// deployment's hash tag (the node refuses a script whose keys span slots),
// and the notices travel by sharded pub/sub on the node of that slot.
func TestSupervisorsOnRedisCluster(t *testing.T) {
	s := redistest.Start(t, redistest.WithCluster(), redistest.WithTCP())
	prefix := newPrefix()
	rs := fleet(t, 2, crashloop.DefaultSupervisorConfig(), false, func(i int) *Store {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr()}, DialTimeout: 5 * time.Second,
			ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		return New(c, Options{Prefix: prefix, Replica: fmt.Sprintf("replica-%d", i), Timeout: 5 * time.Second})
	})
	reconciled(t, rs[0].store, rs[1].store)
	rs[1].sup.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("flaky")})
	for range crashloop.DefaultBudgetConfig().MaxRespawns + 1 {
		rs[0].sup.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("exit 1")})
	}
	require.Equal(t, []string{"k"}, rs[0].sup.Parked())
	require.Eventually(t, func() bool { return len(rs[1].sup.Parked()) == 1 }, watchdog, 100*time.Microsecond)
	require.NoError(t, rs[1].sup.Resume(context.Background(), "k"))
	require.Eventually(t, func() bool { return len(rs[0].sup.Parked()) == 0 }, watchdog, 100*time.Microsecond)
	st := rs[0].sup.Status(context.Background())
	require.Equal(t, 3, st.Fleet.RestartsInHour, "the fleet breaker too: the budget's 3 respawns between both")

	// The same step with keys outside the tag is refused by the node.
	rdb := s.Client(nil)
	err := script.script.Run(context.Background(), rdb, []string{"{a}:k:x", "{b}:fleet"}, "lookup").Err()
	require.ErrorContains(t, err, "CROSSSLOT")
}
