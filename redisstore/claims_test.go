package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
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
		return err == nil && holder == st.claimant()
	}, watchdog, time.Millisecond, "the server took the claim")

	won, err := st.Claim(ctx, 1)
	require.NoError(t, err)
	require.True(t, won, "the retried claim wins")
	won, err = other.Claim(ctx, 1)
	require.NoError(t, err)
	require.False(t, won)
}

// claimsLedger is a cutLedger whose notices a test can also stop alone
// (deaf), and that records the answers of the claims it passes on.
type claimsLedger struct {
	*cutLedger
	deaf    atomic.Bool
	mu      sync.Mutex
	answers []string
}

var errLostReply = errors.New("the reply was lost (test)")

func newClaimsLedger(st *Store) *claimsLedger {
	return &claimsLedger{cutLedger: &cutLedger{Store: st}}
}

func (c *claimsLedger) Open(cfg crashloop.SupervisorConfig, notify func(share.Change)) error {
	return c.cutLedger.Open(cfg, func(ch share.Change) {
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
		Options{Prefix: prefix, Replica: "writer", Timeout: 300 * time.Millisecond}))
	t.Cleanup(func() { _ = w.Close() })
	evs0 := &events{}
	sup0, err := newShared(crashloop.DefaultSupervisorConfig(), w, crashloop.WithEventHandler(evs0))
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

	// The store's first check of the server's configuration has ended, so
	// that the write-back is the first request the slowed proxy holds back
	// (a write before it runs the check first, and under load the check
	// took the whole deadline: the write-back was never sent).
	require.Eventually(t, w.Store.checked.Load, watchdog, time.Millisecond)
	// Three connections open and idle in the pool (three blocking calls at
	// once): the write-back takes one, rather than dial a new one whose
	// handshake the slowed proxy would hold back past the deadline (the
	// write-back was then never sent: 1 run in about 50 under load).
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { _ = w.Store.rdb.Do(ctx, "BLPOP", "no-such-list", "0.1").Err() })
	}
	wg.Wait()
	w.deaf.Store(true) // its notice of the write-back does not reach it
	proxy.SetDelay(time.Second)
	require.ErrorIs(t, layerOf(sup0).Flush(ctx), share.ErrUnavailable, "the write-back's reply came too late")
	proxy.SetDelay(0)
	admin := s.Client(nil)
	require.Eventually(t, func() bool {
		ch, err := rs[0].store.Lookup(ctx, "k")
		return err == nil && ch.Park != nil && ch.Version == 1
	}, watchdog, time.Millisecond, "the server wrote the park back")
	holder, err := admin.Get(ctx, w.keys.claim(1)).Result()
	require.NoError(t, err)
	require.Equal(t, "", holder, "a write-back's claim names no claimer")

	require.NoError(t, layerOf(sup0).Flush(ctx)) // refused: the key is at version 1, the park it wrote
	require.Equal(t, []string{"k"}, sup0.Parked())
	require.Eventually(t, func() bool { return len(w.told()) > 0 }, watchdog, time.Millisecond, "the writer claims the park it learnt")
	require.Equal(t, []string{"lost 1"}, w.told())
	require.Len(t, evs0.of(crashloop.EventStartupExhausted), 1)
	require.Empty(t, rs[0].evs.of(crashloop.EventStartupExhausted))
}

// slowAfterPark is a Store whose proxy starts holding replies back right
// after a judge step that made a park: the park's reply arrives, the claim
// that follows reaches the server and is applied, and its reply is lost.
type slowAfterPark struct {
	*Store
	proxy *redistest.SlowProxy
}

func (l *slowAfterPark) Judge(ctx context.Context, j share.Judgment) (share.Verdict, error) {
	v, err := l.Store.Judge(ctx, j)
	if err == nil && v.NewPark {
		l.proxy.SetDelay(time.Second)
	}
	return v, err
}

// A park whose maker's claim was applied by the server but whose reply was
// lost (held back past the Store's timeout) is still announced, once: the
// maker tries its claim again a second later and, holding it, wins it.
// (Found by the fault run, docs/faults.md: before, SET NX found the maker's
// own claim and answered lost; every other replica lost too, and the park
// was never announced.)
func TestParkWithALostClaimReplyIsAnnouncedOnce(t *testing.T) {
	s := redistest.Start(t)
	proxy := redistest.NewSlowProxy(t, s, 0)
	prefix := newPrefix()
	cfg := crashloop.DefaultSupervisorConfig()
	var rs []*replica
	for i := range 2 {
		c := testClient(t, s)
		if i == 0 {
			c = proxy.Client(BoundedOptions(nil, time.Second))
		}
		r := &replica{store: New(c, Options{Prefix: prefix, Replica: fmt.Sprintf("replica-%d", i), Timeout: 300 * time.Millisecond}), evs: &events{}}
		t.Cleanup(func() { _ = r.store.Close() })
		var l share.Ledger = r.store
		if i == 0 {
			l = &slowAfterPark{Store: r.store, proxy: proxy}
		}
		sup, err := newShared(cfg, l, crashloop.WithEventHandler(r.evs))
		require.NoError(t, err)
		r.sup = sup
		rs = append(rs, r)
	}
	reconciled(t, rs[0].store, rs[1].store)
	ctx := context.Background()
	for range cfg.Budget.MaxRespawns {
		require.Equal(t, crashloop.ActionRestart, rs[1].sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")}).Action)
	}
	d := rs[0].sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("flaky")})
	proxy.SetDelay(0)
	var pe *crashloop.ParkedError
	require.ErrorAs(t, d.Err, &pe, "the park's reply came")
	require.Equal(t, int64(1), pe.Version)

	// The claim reaches the server, and its reply is lost. Under load it
	// may reach it only after the decision returned, or not within the
	// decision's deadline at all: then its retry, or the other replica's
	// claim of the park it learnt, takes it. Either way the park is
	// announced once (below).
	admin := s.Client(nil)
	require.Eventually(t, func() bool { return admin.Get(ctx, rs[0].store.keys.claim(1)).Val() != "" }, watchdog, time.Millisecond,
		"the park claimed")
	if w := admin.Get(ctx, rs[0].store.keys.claim(1)).Val(); w != rs[0].store.claimant() {
		t.Logf("the maker's claim was not applied before another's: %s holds it", w)
	}
	announced(t, rs, crashloop.EventStartupExhausted, rs[0].store.keys.claim(1), s, []int{0, 0})
}

// A park whose maker died before it claimed it (its step applied, its
// claim never sent) is announced, once, by a replica that never heard its
// notice, when its own decision is refused for it: the refusal carries
// the park, and the replica claims it a second later as from a notice.
// (Before, a refusal claimed nothing, and the park was never announced.)
func TestParkLearntFromARefusalIsAnnouncedOnce(t *testing.T) {
	s := redistest.Start(t)
	prefix := newPrefix()
	maker := New(testClient(t, s), Options{Prefix: prefix, Replica: "maker"})
	require.NoError(t, maker.Open(crashloop.DefaultSupervisorConfig(), nil))
	t.Cleanup(func() { _ = maker.Close() })
	r := &replica{store: New(testClient(t, s), Options{Prefix: prefix, Replica: "replica-0"}), evs: &events{}}
	t.Cleanup(func() { _ = r.store.Close() })
	l := newClaimsLedger(r.store)
	l.deaf.Store(true)
	sup, err := newShared(crashloop.DefaultSupervisorConfig(), l, crashloop.WithEventHandler(r.evs))
	require.NoError(t, err)
	r.sup = sup

	pe := park(t, maker, "k", time.Now()).Park // the maker dies here
	d := sup.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("flaky")})
	var got *crashloop.ParkedError
	require.ErrorAs(t, d.Err, &got, "refused for the park")
	require.Equal(t, pe.Version, got.Version)
	announced(t, []*replica{r}, crashloop.EventStartupExhausted, r.store.keys.claim(pe.Version), s, []int{0})
	require.Equal(t, []string{"won " + strconv.FormatInt(pe.Version, 10)}, l.told(), "claimed once")
	ev := r.evs.of(crashloop.EventStartupExhausted)[0]
	require.Equal(t, [3]any{"k", pe.Reason, pe.Since}, [3]any{ev.Key, ev.Reason, ev.Time})
}
