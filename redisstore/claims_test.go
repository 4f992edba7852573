package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/stretchr/testify/require"
)

// Claims whose replies are lost (docs/redis.md, Announcing).

// A claim whose reply was lost (the server took it; the reply came after
// the Store gave up) wins when its replica claims again, and still loses
// for every other replica. (Before, the retry lost to the claim it had
// made itself, and nobody announced the transition.)
func TestClaimRetriedAfterALostReplyWins(t *testing.T) {
	s := redistest.Start(t)
	proxy := redistest.NewSlowProxy(t, s, 0)
	prefix := newPrefix()
	st := New(proxy.Client(BoundedOptions(nil, time.Second)), Options{Prefix: prefix, Replica: "replica-0", Timeout: 200 * time.Millisecond})
	other := New(testClient(t, s), Options{Prefix: prefix, Replica: "replica-1"})
	require.NoError(t, other.Open(crashloop.DefaultSupervisorConfig(), nil))
	t.Cleanup(func() { _ = other.Close() })
	ctx := context.Background()
	require.Equal(t, int64(1), park(t, other, "k", time.Now()).Park.Version)
	_, err := st.Lookup(ctx, "k") // learns the epoch
	require.NoError(t, err)

	proxy.SetDelay(time.Second)
	_, err = st.Claim(ctx, 1)
	require.Error(t, err, "the reply came too late")
	proxy.SetDelay(0)
	admin := s.Client(nil)
	require.Eventually(t, func() bool {
		holder, err := admin.Get(ctx, st.keys.claim(1)).Result()
		return err == nil && holder == "replica-0"
	}, watchdog, time.Millisecond, "the server took the claim")

	won, err := st.Claim(ctx, 1)
	require.NoError(t, err)
	require.True(t, won, "the retried claim wins")
	won, err = other.Claim(ctx, 1)
	require.NoError(t, err)
	require.False(t, won)
}

// claimsLedger is a cutLedger whose notices a test can also stop alone
// (deaf), that loses the reply of the first claim of each version when
// lose is set (the claim reaches the server; the caller gets an error, as
// when the reply is lost), and that records the answers of the other
// claims it passes on.
type claimsLedger struct {
	*cutLedger
	deaf    atomic.Bool
	lose    bool
	mu      sync.Mutex
	tried   map[int64]bool
	answers []string
}

func newClaimsLedger(st *Store, lose bool) *claimsLedger {
	return &claimsLedger{cutLedger: &cutLedger{Store: st}, lose: lose, tried: map[int64]bool{}}
}

var errLostReply = errors.New("the reply was lost (test)")

func (c *claimsLedger) Open(cfg crashloop.SupervisorConfig, notify func(crashloop.LedgerChange)) error {
	return c.cutLedger.Open(cfg, func(ch crashloop.LedgerChange) {
		if !c.deaf.Load() {
			notify(ch)
		}
	})
}

func (c *claimsLedger) Claim(ctx context.Context, version int64) (bool, error) {
	if err := c.fail(); err != nil {
		return false, err
	}
	won, err := c.Store.Claim(ctx, version)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lose && !c.tried[version] {
		c.tried[version] = true
		return false, errLostReply
	}
	answer := "lost "
	switch {
	case err != nil:
		answer = "error "
	case won:
		answer = "won "
	}
	c.answers = append(c.answers, answer+strconv.FormatInt(version, 10))
	return won, err
}

// told returns the answers of the claims passed on, in order.
func (c *claimsLedger) told() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.answers...)
}

// The claim of a park made by a replica's own step loses its reply: the
// Supervisor tries it again a second later, wins it, and announces the
// park, once. (Before, the park was never announced.)
func TestParkWhoseClaimReplyWasLostIsAnnouncedOnce(t *testing.T) {
	s := redistest.Start(t)
	newStore := onServer(t, s, Options{})
	lossy := newClaimsLedger(newStore(0), true)
	t.Cleanup(func() { _ = lossy.Close() })
	evs0 := &events{}
	sup0, err := crashloop.NewSharedSupervisor(crashloop.DefaultSupervisorConfig(), lossy, crashloop.WithEventHandler(evs0))
	require.NoError(t, err)
	rs := fleet(t, 1, crashloop.DefaultSupervisorConfig(), false, func(int) *Store { return newStore(1) })
	reconciled(t, lossy.Store, rs[0].store)
	ctx := context.Background()

	d := sup0.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	all := []*replica{{sup: sup0, store: lossy.Store, evs: evs0}, rs[0]}
	announced(t, all, crashloop.EventStartupExhausted, lossy.keys.claim(1), s, []int{0, 0})
	require.Len(t, evs0.of(crashloop.EventStartupExhausted), 1, "its maker announced it, on its retry")
	require.Equal(t, []string{"won 1"}, lossy.told())
}

// A replica parks a key alone and announces it; its write-back is applied
// but its reply is lost. Its next write-back is refused (the key is at the
// version written back) and tells it of that park, which it claims as any
// park it did not see made: the claim loses, for a write-back's claim is
// won by nobody, its writer included, so the park is announced once. (With
// a claim that its holder wins again and a write-back that held its
// writer's name, the writer announced it a second time.)
func TestWriteBackWithALostReplyIsAnnouncedOnce(t *testing.T) {
	s := redistest.Start(t)
	proxy := redistest.NewSlowProxy(t, s, 0)
	prefix := newPrefix()
	w := newClaimsLedger(New(proxy.Client(BoundedOptions(nil, time.Second)),
		Options{Prefix: prefix, Replica: "writer", Timeout: 300 * time.Millisecond}), false)
	t.Cleanup(func() { _ = w.Close() })
	evs0 := &events{}
	sup0, err := crashloop.NewSharedSupervisor(crashloop.DefaultSupervisorConfig(), w, crashloop.WithEventHandler(evs0))
	require.NoError(t, err)
	rs := fleet(t, 1, crashloop.DefaultSupervisorConfig(), false, onServer(t, s, Options{Prefix: prefix}))
	reconciled(t, w.Store, rs[0].store)
	ctx := context.Background()
	require.Equal(t, crashloop.ActionRestart, sup0.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")}).Action)

	w.cut.Store(true)
	d := sup0.Decide(ctx, "k", crashloop.RunResult{Err: errBadConfig})
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	require.Len(t, evs0.of(crashloop.EventStartupExhausted), 1, "announced at once, decided alone")
	w.cut.Store(false)

	w.deaf.Store(true) // its notice of the write-back does not reach it
	proxy.SetDelay(time.Second)
	require.ErrorIs(t, sup0.Flush(ctx), crashloop.ErrStoreUnavailable, "the write-back's reply came too late")
	proxy.SetDelay(0)
	admin := s.Client(nil)
	require.Eventually(t, func() bool {
		ch, err := rs[0].store.Lookup(ctx, "k")
		return err == nil && ch.Park != nil && ch.Version == 1
	}, watchdog, time.Millisecond, "the server wrote the park back")
	holder, err := admin.Get(ctx, w.keys.claim(1)).Result()
	require.NoError(t, err)
	require.Equal(t, "", holder, "a write-back's claim names no claimer")

	require.NoError(t, sup0.Flush(ctx)) // refused: the key is at version 1, the park it wrote
	require.Equal(t, []string{"k"}, sup0.Parked())
	require.Eventually(t, func() bool { return len(w.told()) > 0 }, watchdog, time.Millisecond, "the writer claims the park it learnt")
	require.Equal(t, []string{"lost 1"}, w.told())
	require.Len(t, evs0.of(crashloop.EventStartupExhausted), 1)
	require.Empty(t, rs[0].evs.of(crashloop.EventStartupExhausted))
}
