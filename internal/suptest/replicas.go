package suptest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/require"
)

// Replicas are Supervisors sharing one ledger, deciding at explicit times
// (DecideAt, ProceedAt), for the scenarios below, which package share runs
// on a MemoryLedger and redisstore on a real redis-server.
type Replicas struct {
	Sups []*crashloop.Supervisor
	// Events returns the events of kind that any of them announced.
	Events func(kind crashloop.EventKind) []crashloop.Event
	// Settle waits until cond holds (a change one replica makes reaches
	// the others at once in memory, within a notice on a server), and
	// fails the test if it does not.
	Settle func(t *testing.T, cond func() bool, msg string)
}

// ProbeConfig is the defaults with a probe a minute after a park, doubling
// up to 5m.
func ProbeConfig() crashloop.SupervisorConfig {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.ProbeAfter, cfg.ProbeMax = time.Minute, 5*time.Minute
	return cfg
}

// CauseConfig is the defaults with a hold on a shared cause of 2 keys
// within a minute, a probe every 30s.
func CauseConfig() crashloop.SupervisorConfig {
	cfg := crashloop.DefaultSupervisorConfig()
	fleet := *cfg.Fleet
	fleet.SharedCause = &crashloop.SharedCauseConfig{Keys: 2, Window: time.Minute, ProbeEvery: 30 * time.Second}
	cfg.Fleet = &fleet
	return cfg
}

// ProbeOnce checks, under ProbeConfig, one probe at a time per key across
// replicas: replica 0 parks key w at t0+3s; every replica learns the park
// and refuses w until its probe is due (t0+63s); then every replica asks
// at that instant, at once, and exactly one gets its restart, the others
// the wait until the next probe (2m). The probe's run is healthy: the key
// is resumed on every replica, announced once (EventResumed, reason probe).
func ProbeOnce(t *testing.T, r Replicas, t0 time.Time) {
	ctx := context.Background()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	boom := errors.New("boom")
	var d crashloop.Decision
	for i := range 4 {
		d = r.Sups[0].DecideAt(ctx, "w", crashloop.RunResult{Err: boom}, at(time.Duration(i)*time.Second))
	}
	var pe *crashloop.ParkedError
	require.ErrorAs(t, d.Err, &pe)
	require.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: pe, Wait: time.Minute}, d, "parked, its probe due in 1m")
	for i, s := range r.Sups[1:] { // each learns the park as its failure of w is refused
		d := s.DecideAt(ctx, "w", crashloop.RunResult{Err: boom}, at(4*time.Second))
		require.Equal(t, crashloop.ActionStop, d.Action, "replica %d", i+1)
		require.Equal(t, 59*time.Second, d.Wait, "replica %d: until the probe", i+1)
	}
	for i, s := range r.Sups {
		require.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: pe, Wait: 33 * time.Second},
			s.ProceedAt(ctx, "w", at(30*time.Second)), "replica %d: before the probe is due", i)
	}

	var mu sync.Mutex
	var wg sync.WaitGroup
	prober, stops := -1, 0
	for i, s := range r.Sups {
		wg.Go(func() {
			d := s.ProceedAt(ctx, "w", at(63*time.Second))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case d.Action == crashloop.ActionRestart:
				require.Equal(t, -1, prober, "a second probe at once, by replica %d", i)
				prober = i
			case d.Action == crashloop.ActionStop && d.Wait == 2*time.Minute:
				stops++
			default:
				t.Errorf("replica %d at the probe's time: %+v", i, d)
			}
		})
	}
	wg.Wait()
	require.NotEqual(t, -1, prober, "no replica probed")
	require.Equal(t, len(r.Sups)-1, stops)
	require.Empty(t, r.Events(crashloop.EventResumed), "not resumed before the probe is healthy")

	// The probe's run is healthy (Ready) and then crashes: w is resumed
	// everywhere, and the crash judged as a fresh key's.
	d = r.Sups[prober].DecideAt(ctx, "w", crashloop.RunResult{Err: boom, Ready: true, Started: at(63 * time.Second)}, at(70*time.Second))
	require.Equal(t, crashloop.ActionRestart, d.Action, "the probe's crash: a fresh key's")
	for i, s := range r.Sups {
		r.Settle(t, func() bool { return len(s.Parked()) == 0 }, fmt.Sprintf("replica %d resumed", i))
	}
	resumed := r.Events(crashloop.EventResumed)
	require.Len(t, resumed, 1, "announced once")
	require.Equal(t, "w", resumed[0].Key)
	require.Equal(t, crashloop.ReasonProbe, resumed[0].Reason)
}

// CauseHeldOnce checks, under CauseConfig, a hold on a shared cause across
// two replicas: keys a and c on replica 0, b and d on replica 1 fail with
// one cause (a connection refused by hosts of different addresses); the
// second key held begins the hold, announced once (fleet.cause_held); held
// keys on both replicas wait for the probe slot; b goes as the probe; its
// healthy run releases the cause, announced once (fleet.cause_released,
// 3 keys), and the held keys of both replicas leave 10s apart in the order
// they were held.
func CauseHeldOnce(t *testing.T, r Replicas, t0 time.Time) {
	ctx := context.Background()
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	db := func(host string) error {
		return errors.New("dial tcp 10.0.0." + host + ":5432: connect: connection refused")
	}
	const cause = "dial tcp N.N.N.N:N: connect: connection refused"
	hold := func(wait time.Duration) crashloop.Decision {
		return crashloop.Decision{Action: crashloop.ActionHold, Wait: wait}
	}
	restart := crashloop.Decision{Action: crashloop.ActionRestart}
	host := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}
	fail := func(i int, key string, sec int) crashloop.Decision {
		return r.Sups[i].DecideAt(ctx, key, crashloop.RunResult{Err: db(host[key]), Started: at(sec - 1)}, at(sec))
	}
	require.Equal(t, crashloop.ActionRestart, fail(0, "a", 1).Action, "one key: judged as usual")
	require.Equal(t, hold(30*time.Second), fail(1, "b", 2), "the second key: the hold begins")
	require.Equal(t, hold(29*time.Second), fail(0, "c", 3))
	require.Equal(t, hold(28*time.Second), fail(1, "d", 4))
	require.Equal(t, hold(27*time.Second), fail(0, "a", 5))
	held := r.Events(crashloop.EventFleetCauseHeld)
	require.Len(t, held, 1, "the hold announced once")
	require.Equal(t, cause, held[0].Cause)
	require.Equal(t, crashloop.ReasonSharedCause, held[0].Reason)
	require.Equal(t, 2, held[0].Attempts)
	for i, s := range r.Sups {
		require.Equal(t, []string{cause}, s.StatusAt(ctx, at(6)).Fleet.HeldCauses, "replica %d", i)
	}

	require.Equal(t, hold(22*time.Second), r.Sups[1].ProceedAt(ctx, "b", at(10)), "before the probe slot")
	require.Equal(t, restart, r.Sups[1].ProceedAt(ctx, "b", at(32)), "the probe")
	require.Equal(t, hold(10*time.Second), r.Sups[0].ProceedAt(ctx, "c", at(32)), "until the probe has run HealthyAfter")
	require.Equal(t, hold(10*time.Second), r.Sups[1].ProceedAt(ctx, "d", at(32)))
	d := r.Sups[1].DecideAt(ctx, "b", crashloop.RunResult{Err: db("2"), Ready: true, Started: at(32)}, at(34))
	require.Equal(t, crashloop.ActionRestart, d.Action, "the probe's crash after a healthy run: judged as usual")
	released := r.Events(crashloop.EventFleetCauseReleased)
	require.Len(t, released, 1, "the release announced once")
	require.Equal(t, cause, released[0].Cause)
	require.Equal(t, 3, released[0].Attempts, "c, d and a released")
	for _, step := range []struct {
		i    int
		key  string
		sec  int
		want crashloop.Decision
	}{
		{0, "c", 34, restart}, {1, "d", 34, hold(10 * time.Second)}, {0, "a", 34, hold(20 * time.Second)},
		{1, "d", 44, restart}, {0, "a", 53, hold(time.Second)}, {0, "a", 54, restart},
	} {
		require.Equal(t, step.want, r.Sups[step.i].ProceedAt(ctx, step.key, at(step.sec)), "replica %d: %s at %ds", step.i, step.key, step.sec)
	}
	for i, s := range r.Sups {
		require.Empty(t, s.StatusAt(ctx, at(55)).Fleet.HeldCauses, "replica %d", i)
	}
}
