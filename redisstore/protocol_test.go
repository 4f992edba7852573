package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/stretchr/testify/require"
)

// The shared-state protocol against real servers, one test per fault it
// answers (docs/redis.md, Versions).

// parkedOn waits until every replica of rs holds exactly keys as parked.
func parkedOn(t *testing.T, rs []*replica, keys ...string) {
	t.Helper()
	if keys == nil {
		keys = []string{}
	}
	for i, r := range rs {
		require.Eventually(t, func() bool {
			got := r.sup.Parked()
			if got == nil {
				got = []string{}
			}
			return equalStrings(got, keys)
		}, watchdog, 100*time.Microsecond, "replica %d: parked %v, want %v", i, r.sup.Parked(), keys)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var errBadConfig = crashloop.Permanent(errors.New("bad config"))

// allOf returns the events of kind of every replica of rs.
func allOf(rs []*replica, kind crashloop.EventKind) []crashloop.Event {
	var out []crashloop.Event
	for _, r := range rs {
		out = append(out, r.evs.of(kind)...)
	}
	return out
}

// counts returns how many events of kind each replica of rs announced.
func counts(rs []*replica, kind crashloop.EventKind) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = len(r.evs.of(kind))
	}
	return out
}

// announced waits until the transition whose claim is claimKey has been
// claimed by one replica of rs, and asserts that since base (counts
// before the transition) that replica announced kind once and every other
// none: the claim is taken once, by its winner.
func announced(t *testing.T, rs []*replica, kind crashloop.EventKind, claimKey string, s *redistest.Server, base []int) {
	t.Helper()
	admin := s.Client(nil)
	var winner string
	require.Eventually(t, func() bool {
		w, err := admin.Get(context.Background(), claimKey).Result()
		winner = w
		n := 0
		for i, c := range counts(rs, kind) {
			n += c - base[i]
		}
		return err == nil && n > 0
	}, watchdog, time.Millisecond, "%s claimed and announced", claimKey)
	for i, r := range rs {
		want := base[i]
		if r.store.claimant() == winner {
			want++
		}
		require.Len(t, r.evs.of(kind), want, "replica %d (%s won %s)", i, winner, claimKey)
	}
}

// A Resume that gave up on a paused server (it returned
// ErrStoreUnavailable) is applied when the server continues: it clears the
// park it named, every replica, the one whose call gave up included,
// learns it from its notice, and exactly one of them announces it (the
// first to claim it). The same resume delivered once more later (a
// retransmit after a partition heals: the very same request) names that
// old park and cannot clear the key's newer park.
func TestLateResumeClearsOnlyThePark(t *testing.T) {
	s := redistest.Start(t)
	rs := fleet(t, 2, crashloop.DefaultSupervisorConfig(), false, onServer(t, s, Options{Timeout: 300 * time.Millisecond}))
	reconciled(t, rs[0].store, rs[1].store)
	ctx := context.Background()
	require.Equal(t, crashloop.ActionRestart, rs[1].sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")}).Action)
	rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	parkedOn(t, rs, "k")
	first, err := rs[1].store.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, int64(1), first.Version)

	base := counts(rs, crashloop.EventResumed)
	s.Pause()
	err = rs[1].sup.Resume(ctx, "k")
	require.ErrorIs(t, err, share.ErrUnavailable)
	require.Equal(t, []string{"k"}, rs[1].sup.Parked(), "a resume that failed changed nothing here")
	s.Continue()
	parkedOn(t, rs) // the server applied it: every replica learns it
	ch, err := rs[0].store.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, share.Change{Key: "k", Version: 2}, ch)
	require.Equal(t, []int{0, 0}, base)
	announced(t, rs, crashloop.EventResumed, rs[0].store.keys.claim(2), s, base)
	ev := allOf(rs, crashloop.EventResumed)[0]
	require.Equal(t, "k", ev.Key)
	require.Equal(t, crashloop.ReasonPermanent, ev.Reason)

	// The key crash-loops again and is parked anew.
	base = counts(rs, crashloop.EventStartupExhausted)
	v, err := rs[0].store.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingPermanent, Incarnation: "k#2",
		Cause: "bad config again", Now: time.Now()})
	require.NoError(t, err)
	require.True(t, v.NewPark)
	require.Equal(t, int64(3), v.Park.Version)
	parkedOn(t, rs, "k")
	announced(t, rs, crashloop.EventStartupExhausted, rs[0].store.keys.claim(3), s, base) // learnt from its notice: no reply of a Supervisor made it

	// The dead resume, delivered again: the same request, naming park 1.
	_, _, err = rs[1].store.Resume(ctx, "k", first.Park.Version, time.Now())
	require.ErrorIs(t, err, share.ErrChanged)
	var ce *share.ChangedError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int64(3), ce.Version)
	require.Equal(t, int64(3), ce.Park.Version)
	ch, err = rs[0].store.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, int64(3), ch.Version, "the new park stands")
	require.Equal(t, "bad config again", ch.Park.LastError.Error())
	require.Equal(t, []string{"k"}, rs[0].sup.Parked())
	require.Equal(t, []string{"k"}, rs[1].sup.Parked())
	d := rs[1].sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")})
	require.Equal(t, crashloop.ActionStop, d.Action, "no fresh budget for the crash loop")
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
}

// cutLedger is a Store a test can cut off from its server: while cut,
// every call fails before it is sent and no notice reaches its Supervisor,
// as for a replica on the far side of a partition.
type cutLedger struct {
	*Store
	cut atomic.Bool
}

var errCut = errors.New("cut off (test)")

func (c *cutLedger) Open(cfg crashloop.SupervisorConfig, notify func(share.Change)) error {
	return c.Store.Open(cfg, func(ch share.Change) {
		if !c.cut.Load() {
			notify(ch)
		}
	})
}

func (c *cutLedger) fail() error {
	if c.cut.Load() {
		return errCut
	}
	return nil
}

func (c *cutLedger) Lookup(ctx context.Context, key string) (share.Change, error) {
	if err := c.fail(); err != nil {
		return share.Change{}, err
	}
	return c.Store.Lookup(ctx, key)
}

func (c *cutLedger) Judge(ctx context.Context, j share.Judgment) (share.Verdict, error) {
	if err := c.fail(); err != nil {
		return share.Verdict{}, err
	}
	return c.Store.Judge(ctx, j)
}

func (c *cutLedger) Proceed(ctx context.Context, key string, now time.Time) (share.Verdict, error) {
	if err := c.fail(); err != nil {
		return share.Verdict{}, err
	}
	return c.Store.Proceed(ctx, key, now)
}

func (c *cutLedger) Resume(ctx context.Context, key string, version int64, now time.Time) (*crashloop.ParkedError, int64, error) {
	if err := c.fail(); err != nil {
		return nil, 0, err
	}
	return c.Store.Resume(ctx, key, version, now)
}

func (c *cutLedger) Forget(ctx context.Context, key string, version int64) (int64, error) {
	if err := c.fail(); err != nil {
		return 0, err
	}
	return c.Store.Forget(ctx, key, version)
}

func (c *cutLedger) Restore(ctx context.Context, parks []*crashloop.ParkedError) ([]share.Restored, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Store.Restore(ctx, parks)
}

func (c *cutLedger) Parked(ctx context.Context) ([]*crashloop.ParkedError, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Store.Parked(ctx)
}

func (c *cutLedger) Fleet(ctx context.Context, now time.Time) (crashloop.FleetStatus, error) {
	if err := c.fail(); err != nil {
		return crashloop.FleetStatus{}, err
	}
	return c.Store.Fleet(ctx, now)
}

// A replica cut off parks a key alone; meanwhile another replica parks it
// and the operator resumes it there. When the first heals, its write-back
// names the version it knew when it parked alone: the key changed since,
// so the park is not written, and the replica adopts the resume. (Before,
// the write-back re-parked the resumed key.)
func TestWriteBackDoesNotUndoALaterResume(t *testing.T) {
	s := redistest.Start(t)
	newStore := onServer(t, s, Options{})
	cut := &cutLedger{Store: newStore(0)}
	t.Cleanup(func() { _ = cut.Close() })
	evs0 := &events{}
	sup0, err := newShared(crashloop.DefaultSupervisorConfig(), cut, crashloop.WithEventHandler(evs0))
	require.NoError(t, err)
	rs := fleet(t, 1, crashloop.DefaultSupervisorConfig(), false, func(int) *Store { return newStore(1) })
	reconciled(t, cut.Store, rs[0].store)
	ctx := context.Background()

	cut.cut.Store(true)
	d := sup0.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	require.Len(t, evs0.of(crashloop.EventStoreUnavailable), 1)
	require.Equal(t, []string{"k"}, sup0.Parked(), "parked alone")

	rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.Equal(t, []string{"k"}, rs[0].sup.Parked())
	require.NoError(t, rs[0].sup.Resume(ctx, "k"))
	require.Len(t, rs[0].evs.of(crashloop.EventResumed), 1)

	cut.cut.Store(false)
	require.NoError(t, layerOf(sup0).Flush(ctx))
	rec := evs0.of(crashloop.EventStoreRecovered)
	require.Len(t, rec, 1)
	require.Equal(t, 0, rec[0].Attempts, "no park written back")
	ch, err := rs[0].store.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, share.Change{Key: "k", Version: 2}, ch, "the resume stands")
	require.Empty(t, sup0.Parked(), "the replica that parked alone adopts the resume")
	require.Empty(t, rs[0].sup.Parked())
	// the resume was claimed at once by the replica that made it, which
	// announced it; the one that adopted it claims it later, and loses
	won, err := cut.Claim(ctx, 2)
	require.NoError(t, err)
	require.False(t, won)
	claimedBy, err := s.Client(nil).Get(ctx, rs[0].store.keys.claim(2)).Result()
	require.NoError(t, err)
	require.Equal(t, rs[0].store.claimant(), claimedBy)
	require.Empty(t, evs0.of(crashloop.EventResumed))
	require.Equal(t, crashloop.ActionRestart, rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")}).Action)
}

// A park decided alone over a key that did not change meanwhile is written
// back with the next version, and every replica refuses the key.
func TestWriteBackOfAnUnchangedKey(t *testing.T) {
	s := redistest.Start(t)
	newStore := onServer(t, s, Options{})
	cut := &cutLedger{Store: newStore(0)}
	t.Cleanup(func() { _ = cut.Close() })
	evs0 := &events{}
	sup0, err := newShared(crashloop.DefaultSupervisorConfig(), cut, crashloop.WithEventHandler(evs0))
	require.NoError(t, err)
	rs := fleet(t, 1, crashloop.DefaultSupervisorConfig(), false, func(int) *Store { return newStore(1) })
	reconciled(t, cut.Store, rs[0].store)
	ctx := context.Background()
	require.Equal(t, crashloop.ActionRestart, rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")}).Action)

	cut.cut.Store(true)
	sup0.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	cut.cut.Store(false)
	require.NoError(t, layerOf(sup0).Flush(ctx))
	rec := evs0.of(crashloop.EventStoreRecovered)
	require.Len(t, rec, 1)
	require.Equal(t, 1, rec[0].Attempts)
	ch, err := rs[0].store.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, int64(1), ch.Version)
	require.Equal(t, int64(1), ch.Park.Version)
	require.Equal(t, crashloop.ReasonPermanent, ch.Park.Reason)
	parkedOn(t, []*replica{rs[0], {sup: sup0}}, "k")
	// the writer resumes it by the version written back
	require.NoError(t, sup0.Resume(ctx, "k"))
	parkedOn(t, []*replica{rs[0], {sup: sup0}})
}

// A notice heard late, after a newer change of its key, changes nothing:
// here a stale park notice (version 1) published after the key's resume
// (version 2) does not re-park the key in a replica's mirror.
func TestStaleNoticeIgnored(t *testing.T) {
	s := redistest.Start(t)
	o := Options{Prefix: newPrefix()}
	rs := fleet(t, 2, crashloop.DefaultSupervisorConfig(), false, onServer(t, s, o))
	reconciled(t, rs[0].store, rs[1].store)
	ctx := context.Background()
	for _, r := range rs {
		for _, key := range []string{"k", "marker"} { // both replicas know both keys
			require.Equal(t, crashloop.ActionRestart, r.sup.Decide(ctx, key, crashloop.RunResult{Err: errors.New("flaky")}).Action)
		}
	}
	rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	parkedOn(t, rs, "k")
	require.NoError(t, rs[0].sup.Resume(ctx, "k"))
	parkedOn(t, rs)

	// The park's notice again, as a late copy of it would arrive.
	admin := s.Client(nil)
	epoch, err := rs[0].store.knownEpoch(ctx)
	require.NoError(t, err)
	stale := "P" + strconv.Itoa(len(epoch)) + ":" + epoch + "5:stale" + "1:k" + micros16(time.Now().UnixMicro()) + "0,1," + "15:permanent_error" + "ebad config"
	ch, _, _, ok := decodeNotice(stale)
	require.True(t, ok)
	require.Equal(t, int64(1), ch.Version)
	require.NoError(t, admin.SPublish(ctx, rs[0].store.keys.events(), stale).Err())
	// then a newer change of another key: heard after the stale notice
	rs[0].sup.Decide(ctx, "marker", crashloop.RunResult{Err: errBadConfig})
	parkedOn(t, rs, "marker")
	require.Equal(t, crashloop.StateExited, rs[1].sup.Status(ctx).Keys["k"].State)
	require.Equal(t, crashloop.ActionRestart, rs[1].sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")}).Action)
}

// A park made by a step whose reply was lost (the reply held back past the
// Store's timeout: the Supervisor decided alone, and its own guards
// restarted the key) is learnt by every replica from its notice and
// announced by exactly one, the first to claim it.
func TestParkWithALostReplyIsAnnouncedOnce(t *testing.T) {
	s := redistest.Start(t)
	proxy := redistest.NewSlowProxy(t, s, 0)
	prefix := newPrefix()
	cfg := crashloop.DefaultSupervisorConfig()
	rs := fleet(t, 2, cfg, false, func(i int) *Store {
		c := testClient(t, s)
		if i == 0 {
			c = proxy.Client(BoundedOptions(nil, time.Second))
		}
		return New(c, Options{Prefix: prefix, Replica: fmt.Sprintf("replica-%d", i), Timeout: 300 * time.Millisecond})
	})
	reconciled(t, rs[0].store, rs[1].store)
	ctx := context.Background()
	require.Equal(t, crashloop.ActionRestart, rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")}).Action)
	for range cfg.Budget.MaxRespawns - 1 {
		require.Equal(t, crashloop.ActionRestart, rs[1].sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")}).Action)
	}
	proxy.SetDelay(time.Second) // the next replies come after the Store gave up
	d := rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")})
	proxy.SetDelay(0)
	require.Equal(t, crashloop.ActionRestart, d.Action, "decided alone, with its own budget")
	require.Len(t, rs[0].evs.of(crashloop.EventStoreUnavailable), 1)

	parkedOn(t, rs, "k") // the server parked it: every replica learns it
	ch, err := rs[1].store.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, int64(1), ch.Version)
	require.Equal(t, crashloop.ReasonBudgetExhausted, ch.Park.Reason)
	announced(t, rs, crashloop.EventStartupExhausted, rs[1].store.keys.claim(1), s, []int{0, 0})
	ev := allOf(rs, crashloop.EventStartupExhausted)[0]
	require.Equal(t, "k", ev.Key)
	require.Equal(t, cfg.Budget.MaxRespawns, ev.Attempts)
	require.EqualError(t, ev.LastError, "flaky")
}

// The server loses its state (FLUSHALL): the next call of each replica
// finds it (the deployment's epoch is gone or another), exactly one
// replica announces store.state_lost, and each writes back the parks it
// knows. The park stays: a replica that never knew it refuses the key
// rather than restart it with a full budget. (Before, every replica
// dropped the park silently and another restarted the key.)
func TestParksSurviveALossOfState(t *testing.T) {
	s := redistest.Start(t)
	rs := fleet(t, 3, crashloop.DefaultSupervisorConfig(), false, onServer(t, s, Options{}))
	reconciled(t, rs[0].store, rs[1].store, rs[2].store)
	ctx := context.Background()
	flaky := crashloop.RunResult{Err: errors.New("flaky")}
	require.Equal(t, crashloop.ActionRestart, rs[1].sup.Decide(ctx, "k", flaky).Action)
	rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	parkedOn(t, rs[:2], "k")

	require.NoError(t, s.Client(nil).FlushAll(ctx).Err())
	require.Equal(t, crashloop.ActionRestart, rs[1].sup.Decide(ctx, "other", flaky).Action)
	require.Empty(t, rs[1].evs.of(crashloop.EventStoreUnavailable), "a loss of state is no outage")
	op := New(testClient(t, s), Options{Prefix: rs[0].store.o.Prefix}) // an operator's, new: it knows no epoch
	ch, err := op.Lookup(ctx, "k")
	require.NoError(t, err)
	require.NotNil(t, ch.Park, "written back")
	require.Equal(t, crashloop.ReasonPermanent, ch.Park.Reason)
	require.Equal(t, int64(1), ch.Version)

	d := rs[2].sup.Decide(ctx, "k", flaky)
	require.Equal(t, crashloop.ActionStop, d.Action, "no fresh budget for the parked key")
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	require.Equal(t, crashloop.ActionRestart, rs[0].sup.Decide(ctx, "other", flaky).Action)
	for i, r := range rs {
		require.Equal(t, []string{"k"}, r.sup.Parked(), "replica %d", i)
		require.Empty(t, r.evs.of(crashloop.EventStoreRecovered), "replica %d", i)
	}
	// one replica announces the loss: the first to claim it (the decision
	// that found it, or another replica's check of the epoch)
	announced(t, rs, crashloop.EventStoreStateLost, rs[0].store.keys.claimLost(serverEpoch(t, s, rs[0].store)), s, []int{0, 0, 0})
	require.Equal(t, 1, count(rs, crashloop.EventStartupExhausted), "the park written back is not announced again")
}

// A loss of state that the members' refresher finds first (an idle
// replica: nothing else asks the server) is its Supervisor's to handle
// all the same: its next step writes back the parks it knows, and it
// announces store.state_lost.
func TestALossTheRefresherFindsIsWrittenBack(t *testing.T) {
	s := redistest.Start(t)
	const ttl = 30 * time.Millisecond // the refresher writes every 10ms
	rs := fleet(t, 1, crashloop.DefaultSupervisorConfig(), false, onServer(t, s, Options{MemberTTL: ttl}))
	r := rs[0]
	ctx := context.Background()
	r.sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.Equal(t, []string{"k"}, r.sup.Parked())
	rdb := s.Client(nil)
	set := r.store.keys.member("replica-0")
	require.Eventually(t, func() bool { return rdb.Exists(ctx, set).Val() == 1 }, watchdog, time.Millisecond)

	require.NoError(t, rdb.FlushAll(ctx).Err()) // the refresher finds the loss
	writtenBackAfterLoss(t, s, r)
}

// So is a loss that the notices' reconcile finds first: a server restarted
// without persistence drops the subscription, and the reconcile after the
// new one is the replica's first call.
func TestALossTheReconcileFindsIsWrittenBack(t *testing.T) {
	s := redistest.Start(t)
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil // no refresher
	rs := fleet(t, 1, cfg, false, onServer(t, s, Options{}))
	r := rs[0]
	reconciled(t, r.store)
	ctx := context.Background()
	r.sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.Equal(t, []string{"k"}, r.sup.Parked())
	before := r.store.reconciled.Load()
	s.Kill()
	s.Restart() // the reconcile after the new subscription finds the loss
	writtenBackAfterLoss(t, s, r)
	require.Eventually(t, func() bool { return r.store.reconciled.Load() > before }, watchdog, time.Millisecond,
		"the reconcile done at the next ping")
}

// writtenBackAfterLoss checks that r writes back its park of k, without
// waiting for a decision of its own, once its Store found a loss of state,
// and announces the loss once.
func writtenBackAfterLoss(t *testing.T, s *redistest.Server, r *replica) {
	t.Helper()
	ctx := context.Background()
	op := New(testClient(t, s), Options{Prefix: r.store.o.Prefix})
	require.Eventually(t, func() bool {
		ch, err := op.Lookup(ctx, "k")
		return err == nil && ch.Park != nil
	}, watchdog, time.Millisecond, "written back")
	require.Eventually(t, func() bool { return len(r.evs.of(crashloop.EventStoreStateLost)) > 0 }, watchdog, time.Millisecond)
	require.Equal(t, crashloop.ActionRestart, r.sup.Decide(ctx, "other", crashloop.RunResult{Err: errors.New("flaky")}).Action)
	require.Len(t, r.evs.of(crashloop.EventStoreStateLost), 1)
}
