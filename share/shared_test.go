package share_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replicas returns n Supervisors sharing one MemoryLedger, each with its
// own mock clock at testT0 and recorder.
func replicas(t *testing.T, cfg crashloop.SupervisorConfig, ledgers []share.Ledger) ([]*crashloop.Supervisor, []*recorder, []*clock.Mock) {
	t.Helper()
	var sups []*crashloop.Supervisor
	var recs []*recorder
	var clocks []*clock.Mock
	for _, l := range ledgers {
		rec, c := newRecorder(), mockAt(testT0)
		s, err := newShared(cfg, l, crashloop.WithClock(c), crashloop.WithEventHandler(rec))
		require.NoError(t, err)
		sups, recs, clocks = append(sups, s), append(recs, rec), append(clocks, c)
	}
	return sups, recs, clocks
}

func memoryReplicas(n int) []share.Ledger {
	first := share.NewMemoryLedger()
	out := []share.Ledger{first}
	for range n - 1 {
		out = append(out, first.Replica())
	}
	return out
}

func countKind(recs []*recorder, kind crashloop.EventKind) int {
	n := 0
	for _, r := range recs {
		n += r.Of(kind)
	}
	return n
}

// Replicas share one budget: failures of one key on three Supervisors
// spend one budget, the park is announced once, by the replica that made
// it, and refused by every replica; a Resume on any applies to all.
func TestSharedReplicasShareOneBudget(t *testing.T) {
	sups, recs, _ := replicas(t, crashloop.DefaultSupervisorConfig(), memoryReplicas(3))
	boom := errors.New("boom")
	for i, want := range []time.Duration{millis(500), time.Second, millis(1500)} {
		d := sups[i].DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, testT0.Add(time.Duration(i)*time.Second))
		assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: want}, d, "replica %d", i)
	}
	d := sups[0].DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, testT0.Add(3*time.Second))
	var pe *crashloop.ParkedError
	require.ErrorAs(t, d.Err, &pe)
	assert.ErrorIs(t, d.Err, boom, "the replica that parked it carries its own error")
	assert.Equal(t, 3, pe.Attempts)
	assert.Equal(t, 1, countKind(recs, crashloop.EventStartupExhausted))
	assert.Equal(t, 1, recs[0].Of(crashloop.EventStartupExhausted))

	// Every replica refuses it, and those that know the key were told.
	for i, s := range sups {
		assert.Equal(t, []string{"k"}, s.Parked(), "replica %d", i)
		assert.Equal(t, crashloop.ActionStop, s.DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, testT0.Add(4*time.Second)).Action)
		assert.ErrorIs(t, s.Run(context.Background(), "k", func(context.Context) error { return nil }), crashloop.ErrParked)
	}
	assert.Equal(t, 1, countKind(recs, crashloop.EventStartupExhausted), "refusals announce nothing")

	require.NoError(t, sups[2].Resume(context.Background(), "k"))
	assert.Equal(t, 1, countKind(recs, crashloop.EventResumed))
	for i, s := range sups {
		assert.Empty(t, s.Parked(), "replica %d", i)
		assert.ErrorIs(t, s.Resume(context.Background(), "k"), crashloop.ErrNotParked)
	}
	d = sups[1].DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, testT0.Add(5*time.Second))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: millis(500)}, d, "a full budget again")
}

// The fleet breaker counts the restarts of every replica, and trips and
// re-arms once between them.
func TestSharedFleetCountsEveryReplica(t *testing.T) {
	sups, recs, _ := replicas(t, crashloop.DefaultSupervisorConfig(), memoryReplicas(2))
	for i := range 40 {
		d := sups[i%2].DecideAt(context.Background(), fmt.Sprintf("k%d", i), crashloop.RunResult{Err: crashloop.Restart(nil)}, testT0)
		assert.Equal(t, i == 39, d.Action == crashloop.ActionHold, "restart %d", i+1)
	}
	assert.Equal(t, 1, countKind(recs, crashloop.EventFleetTripped))
	assert.Equal(t, 1, recs[1].Of(crashloop.EventFleetTripped), "announced by the replica whose restart tripped it")
	for _, s := range sups {
		st := s.StatusAt(context.Background(), testT0)
		assert.True(t, st.Fleet.BreakerTripped)
		assert.Equal(t, 40, st.Fleet.RestartsInHour)
	}
	assert.Equal(t, crashloop.ActionHold, sups[0].DecideAt(context.Background(), "late", crashloop.RunResult{Err: crashloop.Restart(nil)}, testT0.Add(time.Minute)).Action,
		"a tripped breaker holds the restarts of every replica")
	assert.Equal(t, crashloop.ActionRestart, sups[1].ProceedAt(context.Background(), "k39", testT0.Add(2*time.Minute)).Action)
	assert.Equal(t, 1, countKind(recs, crashloop.EventFleetRearmed))
}

// deafLedger never tells its Supervisor of another's change, as a ledger
// whose notice was lost does.
type deafLedger struct{ share.Ledger }

func (d deafLedger) Open(cfg crashloop.SupervisorConfig, _ func(share.Change)) error {
	return d.Ledger.Open(cfg, func(share.Change) {})
}

// A Supervisor that missed the notice of a resume learns it from the
// ledger at the key's next start: the stale park does not refuse it.
func TestSharedResumeWithoutItsNotice(t *testing.T) {
	ledgers := memoryReplicas(2)
	sups, recs, _ := replicas(t, crashloop.DefaultSupervisorConfig(), []share.Ledger{deafLedger{ledgers[0]}, ledgers[1]})
	boom := errors.New("boom")
	for i := range 4 {
		sups[0].DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, testT0.Add(time.Duration(i)*time.Second))
	}
	require.Equal(t, []string{"k"}, sups[0].Parked())
	require.NoError(t, sups[1].Resume(context.Background(), "k"))
	assert.Equal(t, []string{"k"}, sups[0].Parked(), "the notice was lost")

	ran := false
	err := sups[0].Run(context.Background(), "k", func(context.Context) error { ran = true; return nil })
	assert.NoError(t, err)
	assert.True(t, ran, "the key started: the ledger says it is not parked")
	assert.Empty(t, sups[0].Parked())
	assert.Equal(t, 1, countKind(recs, crashloop.EventResumed), "announced once, by the replica that resumed it")
}

// flakyLedger fails every call while down, as a ledger on a server that
// cannot be reached does.
type flakyLedger struct {
	share.Ledger
	down  atomic.Bool
	calls atomic.Int64
	with  atomic.Pointer[error] // the error while down; nil: errRefused
}

var errRefused = errors.New("dial unix redis.sock: connect: connection refused")

func (f *flakyLedger) fail() error {
	f.calls.Add(1)
	if f.down.Load() {
		if p := f.with.Load(); p != nil {
			return *p
		}
		return errRefused
	}
	return nil
}

// misconfigured is a ledger's error that no retry fixes, with its cause.
type misconfigured string

func (m misconfigured) Error() string        { return "redisstore: misconfigured: " + string(m) }
func (m misconfigured) StoreCause() string   { return string(m) }
func (m misconfigured) Is(target error) bool { return target == share.ErrMisconfigured }

// A ledger that fails for a misconfiguration is announced as such, once per
// cause, never as an outage; a change of cause is announced; the Supervisor
// decides alone meanwhile and says store.recovered when the ledger answers.
func TestSharedMisconfigured(t *testing.T) {
	ledgers := memoryReplicas(1)
	flaky := &flakyLedger{Ledger: ledgers[0]}
	sups, recs, clocks := replicas(t, crashloop.DefaultSupervisorConfig(), []share.Ledger{flaky})
	s, rec, c := sups[0], recs[0], clocks[0]
	boom := errors.New("boom")
	noperm := error(fmt.Errorf("redisstore: judge: %w", misconfigured("noperm")))
	oom := error(misconfigured("oom"))
	flaky.with.Store(&noperm)
	flaky.down.Store(true)

	for i := range 3 { // the ledger is asked at 0s, 1s and 2s: the same cause each time
		d := s.DecideAt(context.Background(), "k"+strconv.Itoa(i), crashloop.RunResult{Err: boom}, c.Now())
		assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: millis(500)}, d, "decided alone")
		c.Add(time.Second)
	}
	assert.Equal(t, int64(3), flaky.calls.Load())
	kinds := func(evs []crashloop.Event, kind crashloop.EventKind) []crashloop.Event {
		var out []crashloop.Event
		for _, ev := range evs {
			if ev.Kind == kind {
				out = append(out, ev)
			}
		}
		return out
	}
	evs := rec.Take()
	assert.Equal(t, []crashloop.Event{{Kind: crashloop.EventStoreMisconfigured, Key: "store", Time: testT0, Reason: "noperm", LastError: noperm}},
		kinds(evs, crashloop.EventStoreMisconfigured))
	assert.Empty(t, kinds(evs, crashloop.EventStoreUnavailable), "a misconfiguration is no outage")

	err := s.Resume(context.Background(), "k0")
	assert.ErrorIs(t, err, share.ErrUnavailable)
	assert.ErrorIs(t, err, share.ErrMisconfigured)
	assert.Empty(t, rec.Take(), "the same cause again")
	c.Add(time.Second)

	// Another cause is announced; then an outage; then the ledger is back.
	flaky.with.Store(&oom)
	s.DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, c.Now())
	c.Add(time.Second)
	flaky.with.Store(nil)
	s.DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, c.Now())
	c.Add(time.Second)
	flaky.down.Store(false)
	s.DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, c.Now())
	evs = rec.Take()
	assert.Equal(t, []crashloop.Event{{Kind: crashloop.EventStoreMisconfigured, Key: "store", Time: testT0.Add(4 * time.Second), Reason: "oom", LastError: oom}},
		kinds(evs, crashloop.EventStoreMisconfigured))
	assert.Equal(t, []crashloop.Event{{Kind: crashloop.EventStoreUnavailable, Key: "store", Time: testT0.Add(5 * time.Second), LastError: errRefused}},
		kinds(evs, crashloop.EventStoreUnavailable))
	assert.Len(t, kinds(evs, crashloop.EventStoreRecovered), 1)
}

func (f *flakyLedger) Lookup(ctx context.Context, key string) (share.Change, error) {
	if err := f.fail(); err != nil {
		return share.Change{}, err
	}
	return f.Ledger.Lookup(ctx, key)
}

func (f *flakyLedger) Judge(ctx context.Context, j share.Judgment) (share.Verdict, error) {
	if err := f.fail(); err != nil {
		return share.Verdict{}, err
	}
	return f.Ledger.Judge(ctx, j)
}

func (f *flakyLedger) Proceed(ctx context.Context, key string, now time.Time) (share.Verdict, error) {
	if err := f.fail(); err != nil {
		return share.Verdict{}, err
	}
	return f.Ledger.Proceed(ctx, key, now)
}

func (f *flakyLedger) Resume(ctx context.Context, key string, version int64, now time.Time) (*crashloop.ParkedError, int64, error) {
	if err := f.fail(); err != nil {
		return nil, 0, err
	}
	return f.Ledger.Resume(ctx, key, version, now)
}

func (f *flakyLedger) Forget(ctx context.Context, key string, version int64) (int64, error) {
	if err := f.fail(); err != nil {
		return 0, err
	}
	return f.Ledger.Forget(ctx, key, version)
}

func (f *flakyLedger) Restore(ctx context.Context, parks []*crashloop.ParkedError) ([]share.Restored, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Ledger.Restore(ctx, parks)
}

func (f *flakyLedger) Fleet(ctx context.Context, now time.Time) (crashloop.FleetStatus, error) {
	if err := f.fail(); err != nil {
		return crashloop.FleetStatus{}, err
	}
	return f.Ledger.Fleet(ctx, now)
}

// When its ledger fails, a Supervisor says so once, guards alone, refuses
// to resume, asks again at most once a second, and when the ledger is back
// writes back the park it made alone, so every replica refuses the key.
func TestSharedOutage(t *testing.T) {
	ledgers := memoryReplicas(2)
	flaky := &flakyLedger{Ledger: ledgers[0]}
	sups, recs, clocks := replicas(t, crashloop.DefaultSupervisorConfig(), []share.Ledger{flaky, ledgers[1]})
	s, rec, c := sups[0], recs[0], clocks[0]
	boom := errors.New("boom")

	flaky.down.Store(true)
	var decisions []crashloop.Decision
	for range 4 {
		decisions = append(decisions, s.DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, c.Now()))
		c.Add(100 * time.Millisecond)
	}
	assert.Equal(t, int64(1), flaky.calls.Load(), "the ledger is asked again at most once a second")
	evs := rec.Take()
	require.Len(t, evs, 5)
	assert.Equal(t, crashloop.Event{Kind: crashloop.EventStoreUnavailable, Key: "store", Time: testT0, LastError: errRefused}, evs[0])
	for i, want := range []time.Duration{millis(500), time.Second, millis(1500)} {
		assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: want}, decisions[i], "alone, it keeps its own budget")
	}
	assert.ErrorIs(t, decisions[3].Err, crashloop.ErrParked)
	assert.Equal(t, crashloop.EventStartupExhausted, evs[4].Kind)
	assert.Equal(t, []string{"k"}, s.Parked())

	err := s.Resume(context.Background(), "k")
	assert.ErrorIs(t, err, share.ErrUnavailable, "a resume never pretends to have applied everywhere")
	assert.ErrorContains(t, err, "connection refused")
	assert.Equal(t, []string{"k"}, s.Parked(), "and changes nothing")
	assert.ErrorIs(t, s.Forget(context.Background(), "k"), share.ErrUnavailable)

	// The other replica does not know of the park yet.
	assert.Empty(t, sups[1].Parked())
	assert.Equal(t, crashloop.ActionRestart, sups[1].DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, testT0).Action)

	// Back: the next decision a second later writes the park back first.
	flaky.down.Store(false)
	c.Add(time.Second)
	d := s.DecideAt(context.Background(), "other", crashloop.RunResult{Err: boom}, c.Now())
	assert.Equal(t, crashloop.ActionRestart, d.Action)
	evs = rec.Take()
	require.Len(t, evs, 2)
	assert.Equal(t, crashloop.Event{Kind: crashloop.EventStoreRecovered, Key: "store", Time: c.Now(), Attempts: 1}, evs[0])
	assert.Equal(t, []string{"k"}, sups[1].Parked(), "told of the park written back")
	assert.ErrorIs(t, sups[1].Run(context.Background(), "k", func(context.Context) error { return nil }), crashloop.ErrParked)
	require.NoError(t, sups[1].Resume(context.Background(), "k"))
	assert.Empty(t, s.Parked())
}

// A shared Supervisor keeps no file of its own: its ledger keeps its state.
func TestSharedRefusesAStore(t *testing.T) {
	_, err := newShared(crashloop.DefaultSupervisorConfig(), share.NewMemoryLedger(),
		crashloop.WithStore(crashloop.NewFileStore(t.TempDir()+"/state.json")))
	require.ErrorIs(t, err, crashloop.ErrInvalidConfig)
	var ce *crashloop.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "WithStore", ce.Field)
	s, err := newShared(crashloop.DefaultSupervisorConfig(), nil)
	require.NoError(t, err, "a nil ledger is NewSupervisor")
	assert.NotNil(t, s)
}

// Flush writes back at once, for a program about to exit, the parks made
// while the ledger failed; while it still fails, Flush says so.
func TestSharedFlush(t *testing.T) {
	ledgers := memoryReplicas(2)
	flaky := &flakyLedger{Ledger: ledgers[0]}
	sups, recs, _ := replicas(t, crashloop.DefaultSupervisorConfig(), []share.Ledger{flaky, ledgers[1]})
	require.NoError(t, layerOf(sups[0]).Flush(context.Background()), "nothing to write back")
	flaky.down.Store(true)
	for range 4 {
		sups[0].DecideAt(context.Background(), "k", crashloop.RunResult{Err: errors.New("boom")}, testT0)
	}
	require.Equal(t, []string{"k"}, sups[0].Parked())
	err := layerOf(sups[0]).Flush(context.Background())
	assert.ErrorIs(t, err, share.ErrUnavailable)
	assert.ErrorContains(t, err, "writing back 1 park decided alone")
	run := func() error {
		return sups[1].Run(context.Background(), "k", func(context.Context) error { return nil })
	}
	assert.NoError(t, run(), "the other replica does not know of the park")

	flaky.down.Store(false)
	require.NoError(t, layerOf(sups[0]).Flush(context.Background()))
	assert.ErrorIs(t, run(), crashloop.ErrParked, "the other replica refuses the key")
	assert.Equal(t, 1, recs[0].Of(crashloop.EventStoreRecovered))
	require.NoError(t, layerOf(sups[0]).Flush(context.Background()), "written back once")
	assert.Equal(t, 1, recs[0].Of(crashloop.EventStoreRecovered))
}

// Each replica's LocalRestarts counts the restarts it scheduled itself,
// while TotalRestarts is the deployment's count as of its last step; a
// park carries its time in ParkedSince on every replica that knows the
// key, and a resume sets both counts back to 0.
func TestSharedLocalRestarts(t *testing.T) {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Budget.MaxRespawns = 5
	cfg.Budget.Window = time.Hour
	sups, _, _ := replicas(t, cfg, memoryReplicas(2))
	boom := errors.New("boom")
	at := testT0
	for i := range 5 { // replica 0 restarts k three times, replica 1 twice
		at = testT0.Add(time.Duration(i) * time.Second)
		d := sups[[]int{0, 1, 0, 1, 0}[i]].DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, at)
		require.Equal(t, crashloop.ActionRestart, d.Action, "failure %d", i+1)
	}
	for i, want := range []struct{ local, total int }{{3, 5}, {2, 4}} {
		ks := sups[i].StatusAt(context.Background(), at).Keys["k"]
		assert.Equal(t, want.local, ks.LocalRestarts, "replica %d: LocalRestarts", i)
		assert.Equal(t, want.total, ks.TotalRestarts, "replica %d: TotalRestarts", i)
		assert.True(t, ks.ParkedSince.IsZero(), "replica %d: ParkedSince of a key that is not parked", i)
	}

	parkAt := testT0.Add(10 * time.Second)
	d := sups[1].DecideAt(context.Background(), "k", crashloop.RunResult{Err: boom}, parkAt)
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	for i, want := range []int{3, 2} {
		ks := sups[i].StatusAt(context.Background(), parkAt).Keys["k"]
		assert.Equal(t, want, ks.LocalRestarts, "replica %d: a park is no restart", i)
		assert.Equal(t, crashloop.ReasonBudgetExhausted, ks.Reason, "replica %d", i)
		assert.Equal(t, parkAt, ks.ParkedSince, "replica %d: ParkedSince", i)
	}

	require.NoError(t, sups[0].Resume(context.Background(), "k"))
	for i := range sups {
		ks := sups[i].StatusAt(context.Background(), parkAt).Keys["k"]
		assert.Equal(t, 0, ks.LocalRestarts, "replica %d: after the resume", i)
		assert.True(t, ks.ParkedSince.IsZero(), "replica %d: ParkedSince after the resume", i)
	}
}

// Without a shared ledger, LocalRestarts is TotalRestarts.
func TestLocalRestartsAlone(t *testing.T) {
	s, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig(), crashloop.WithClock(mockAt(testT0)))
	require.NoError(t, err)
	for i := range 2 {
		require.Equal(t, crashloop.ActionRestart, s.DecideAt(context.Background(), "k", crashloop.RunResult{Err: errors.New("boom")}, testT0.Add(time.Duration(i)*time.Second)).Action)
	}
	ks := s.StatusAt(context.Background(), testT0.Add(2*time.Second)).Keys["k"]
	assert.Equal(t, 2, ks.LocalRestarts)
	assert.Equal(t, 2, ks.TotalRestarts)
}

// A shared ledger's fleet status counts the members every replica
// reported, before any park as after one.
func TestSharedFleetCountsReports(t *testing.T) {
	sups, _, _ := replicas(t, crashloop.DefaultSupervisorConfig(), memoryReplicas(2))
	for i, key := range []string{"a", "b", "c"} {
		require.Equal(t, crashloop.ActionRestart, sups[i%2].DecideAt(context.Background(), key, crashloop.RunResult{Err: errors.New("boom")}, testT0).Action)
	}
	for i, s := range sups {
		fs := s.StatusAt(context.Background(), testT0).Fleet
		assert.Equal(t, [2]int{0, 3}, [2]int{fs.FailingKeys, fs.Keys}, "replica %d", i)
	}
	require.ErrorIs(t, sups[1].DecideAt(context.Background(), "b", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad"))}, testT0).Err, crashloop.ErrParked)
	for i, s := range sups {
		fs := s.StatusAt(context.Background(), testT0).Fleet
		assert.Equal(t, [2]int{1, 3}, [2]int{fs.FailingKeys, fs.Keys}, "replica %d", i)
	}
}

// Replicas on the same keys count each key once: three Supervisors on four
// keys with two parked note 2 of 4 and trip (half the fleet, at least 2),
// as one Supervisor of the four keys would; a key counts while a run of it
// goes on, and stops counting when it exits cleanly on every replica.
func TestSharedFleetCountsKeysOnce(t *testing.T) {
	ledgers := memoryReplicas(3)
	sups, recs, _ := replicas(t, crashloop.DefaultSupervisorConfig(), ledgers)
	boom := crashloop.RunResult{Err: errors.New("boom")}
	keys := []string{"a", "b", "c", "d"}
	for _, s := range sups {
		for _, key := range keys {
			require.Equal(t, crashloop.ActionRestart, s.DecideAt(context.Background(), key, boom, testT0).Action)
		}
	}
	fleet := func(i int) string {
		fs := sups[i].StatusAt(context.Background(), testT0).Fleet
		return fmt.Sprintf("tripped=%v %d/%d", fs.BreakerTripped, fs.FailingKeys, fs.Keys)
	}
	assert.Equal(t, "tripped=false 0/4", fleet(0))
	fatal := crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))}
	require.ErrorIs(t, sups[0].DecideAt(context.Background(), "a", fatal, testT0).Err, crashloop.ErrParked)
	assert.Equal(t, "tripped=false 1/4", fleet(1))
	require.ErrorIs(t, sups[1].DecideAt(context.Background(), "b", fatal, testT0).Err, crashloop.ErrParked)
	assert.Equal(t, "tripped=true 2/4", fleet(2))
	require.Equal(t, 1, countKind(recs, crashloop.EventFleetTripped))
	trip := recs[1].Filter(func(ev crashloop.Event) bool { return ev.Kind == crashloop.EventFleetTripped })
	require.Len(t, trip, 1, "announced by the replica whose park tripped it")
	assert.Equal(t, []any{crashloop.ReasonFleetFailingFraction, 2, 4}, []any{trip[0].Reason, trip[0].Failing, trip[0].Total})

	// e counts while it runs, on one replica, and not once it exited
	require.NoError(t, sups[2].Run(context.Background(), "e", func(context.Context) error {
		assert.Equal(t, "tripped=true 2/5", fleet(0))
		return nil
	}))
	assert.Equal(t, "tripped=true 2/4", fleet(0))
	// c and d exit cleanly everywhere: 2 of 2 left, the parked ones
	for _, s := range sups {
		for _, key := range []string{"c", "d"} {
			require.Equal(t, crashloop.ActionStop, s.DecideAt(context.Background(), key, crashloop.RunResult{}, testT0).Action)
		}
	}
	assert.Equal(t, "tripped=true 2/2", fleet(0))
}
