package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/stretchr/testify/require"
)

// Replies that arrive after the notices of newer transitions (docs/redis.md,
// Versions: a reply never moves a mirror back).

// lateReplies is a Store whose Judge or Resume reply a test holds back: the
// step is applied on the server at once, and its reply reaches the
// Supervisor only when the test releases it, after the notices of later
// transitions. It records the highest version it told its Supervisor.
type lateReplies struct {
	*Store
	hold    atomic.Bool
	held    chan struct{} // closed when a reply is held
	release chan struct{}
	told    atomic.Int64
	claims  atomic.Int32 // claims answered
}

func (l *lateReplies) Claim(ctx context.Context, version int64) (bool, error) {
	won, err := l.Store.Claim(ctx, version)
	l.claims.Add(1)
	return won, err
}

func newLateReplies(st *Store) *lateReplies {
	return &lateReplies{Store: st, held: make(chan struct{}), release: make(chan struct{})}
}

func (l *lateReplies) Open(cfg crashloop.SupervisorConfig, notify func(share.Change)) error {
	return l.Store.Open(cfg, func(ch share.Change) {
		notify(ch)
		if ch.Version > l.told.Load() {
			l.told.Store(ch.Version)
		}
	})
}

func (l *lateReplies) wait() {
	if l.hold.CompareAndSwap(true, false) {
		close(l.held)
		<-l.release
	}
}

func (l *lateReplies) Judge(ctx context.Context, j share.Judgment) (share.Verdict, error) {
	v, err := l.Store.Judge(ctx, j)
	l.wait()
	return v, err
}

func (l *lateReplies) Forget(ctx context.Context, key string, version int64) (int64, error) {
	v, err := l.Store.Forget(ctx, key, version)
	l.wait()
	return v, err
}

func (l *lateReplies) Resume(ctx context.Context, key string, version int64, now time.Time) (*crashloop.ParkedError, int64, error) {
	pe, v, err := l.Store.Resume(ctx, key, version, now)
	l.wait()
	return pe, v, err
}

// lateFleet is a replica on a lateReplies and another on a plain Store,
// both knowing key k.
func lateFleet(t *testing.T, h crashloop.EventHandler) (*lateReplies, *crashloop.Supervisor, *replica) {
	s := redistest.Start(t)
	newStore := onServer(t, s, Options{})
	late := newLateReplies(newStore(0))
	t.Cleanup(func() { _ = late.Close() })
	sup0, err := newShared(crashloop.DefaultSupervisorConfig(), late, crashloop.WithEventHandler(h))
	require.NoError(t, err)
	rs := fleet(t, 1, crashloop.DefaultSupervisorConfig(), false, func(int) *Store { return newStore(1) })
	reconciled(t, late.Store, rs[0].store)
	ctx := context.Background()
	flaky := crashloop.RunResult{Err: errors.New("flaky")}
	require.Equal(t, crashloop.ActionRestart, sup0.Decide(ctx, "k", flaky).Action)
	require.Equal(t, crashloop.ActionRestart, rs[0].sup.Decide(ctx, "k", flaky).Action)
	return late, sup0, rs[0]
}

// A replica's judge parks the key (version 1), and its reply comes only
// after the key was resumed (2) and parked again (3) by another replica,
// whose notices the replica took. The late reply does not lift the newer
// park from its mirror. (Before, the replica unparked the key: the server
// held it parked at version 3, the replica's Parked and Status said it was
// not, and no notice or reconcile could put it right, as none is newer.)
func TestLateJudgeReplyKeepsTheNewerPark(t *testing.T) {
	late, sup0, r1 := lateFleet(t, nil)
	ctx := context.Background()
	late.hold.Store(true)
	done := make(chan crashloop.Decision, 1)
	go func() { done <- sup0.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig}) }()
	<-late.held
	parkedOn(t, []*replica{r1}, "k")
	require.NoError(t, r1.sup.Resume(ctx, "k"))
	r1.sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.Eventually(t, func() bool { return late.told.Load() == 3 }, watchdog, time.Millisecond, "the notices of 2 and 3 taken")
	close(late.release)
	d := <-done
	var pe *crashloop.ParkedError
	require.ErrorAs(t, d.Err, &pe)
	require.Equal(t, int64(1), pe.Version, "the decision is its own step's park")
	require.Equal(t, []string{"k"}, sup0.Parked())
	require.Equal(t, crashloop.StateParked, sup0.Status(ctx).Keys["k"].State)
}

// A replica's resume (version 2) is applied, and its reply comes only after
// another replica parked the key again (3) and the replica took that
// notice. The late reply does not lift the newer park. (Before, it did.)
func TestLateResumeReplyKeepsTheNewerPark(t *testing.T) {
	late, sup0, r1 := lateFleet(t, nil)
	ctx := context.Background()
	sup0.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	parkedOn(t, []*replica{r1}, "k")
	late.hold.Store(true)
	done := make(chan error, 1)
	go func() { done <- sup0.Resume(ctx, "k") }()
	<-late.held
	parkedOn(t, []*replica{r1})
	r1.sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.Eventually(t, func() bool { return late.told.Load() == 3 }, watchdog, time.Millisecond, "the notice of 3 taken")
	close(late.release)
	require.NoError(t, <-done)
	require.Equal(t, []string{"k"}, sup0.Parked())
	require.Equal(t, crashloop.StateParked, sup0.Status(ctx).Keys["k"].State)
}

// A replica's judge parks the key, and the park's notice reaches it before
// the reply: it claims the park twice, once from the notice (a second
// later) and once at the reply (at once), and wins both, as a claim its
// holder makes again must (a retry after a lost reply). It announces the
// park once.
func TestParkLearntBeforeItsReplyIsAnnouncedOnce(t *testing.T) {
	evs := &events{}
	late, sup0, _ := lateFleet(t, evs)
	ctx := context.Background()
	late.hold.Store(true)
	done := make(chan crashloop.Decision, 1)
	go func() { done <- sup0.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig}) }()
	<-late.held
	require.Eventually(t, func() bool { return late.told.Load() == 1 }, watchdog, time.Millisecond, "the notice taken first")
	close(late.release)
	require.ErrorIs(t, (<-done).Err, crashloop.ErrParked)
	require.Eventually(t, func() bool { return late.claims.Load() == 2 }, watchdog, time.Millisecond, "claimed at the reply and from the notice")
	require.Len(t, evs.of(crashloop.EventStartupExhausted), 1)
}

// A replica's forget (version 1, of a key not parked) is applied, and its
// reply comes only after another replica parked the key (2) and the
// replica took that notice. The late reply does not drop the newer park
// from its mirror. (Before, the replica dropped the key, park and all.)
func TestLateForgetReplyKeepsTheNewerPark(t *testing.T) {
	late, sup0, r1 := lateFleet(t, nil)
	ctx := context.Background()
	late.hold.Store(true)
	done := make(chan error, 1)
	go func() { done <- sup0.Forget(ctx, "k") }()
	<-late.held
	r1.sup.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.Eventually(t, func() bool { return late.told.Load() == 2 }, watchdog, time.Millisecond, "the notice of 2 taken")
	close(late.release)
	require.NoError(t, <-done)
	require.Equal(t, []string{"k"}, sup0.Parked())
}
