package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/crashloopguard/crashloop/share/ledgertest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// watchdog bounds every wait for something that happens in microseconds
// on a healthy machine: generous, so that a loaded machine under -race
// never fails a test by timing; the tests assert what arrived, not when.
const watchdog = 10 * time.Second

// told collects what a Store tells its notify, as "+KEY@VERSION reason
// attempts cause" for a park and "-KEY@VERSION" for a resume or forget. It
// is safe for concurrent use.
type told struct {
	mu  sync.Mutex
	got []string
}

func (c *told) notify(ch share.Change) {
	s := fmt.Sprintf("-%s@%d", ch.Key, ch.Version)
	if pe := ch.Park; pe != nil {
		last := "<nil>"
		if pe.LastError != nil {
			last = pe.LastError.Error()
		}
		s = fmt.Sprintf("+%s@%d %s %d %s", ch.Key, ch.Version, pe.Reason, pe.Attempts, last)
	}
	c.mu.Lock()
	c.got = append(c.got, s)
	c.mu.Unlock()
}

// until waits (with the watchdog) until the last change told is last, and
// returns everything told.
func (c *told) until(t testing.TB, last string) []string {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		got = slices.Clone(c.got)
		return len(got) > 0 && got[len(got)-1] == last
	}, watchdog, time.Millisecond, "waiting for %q", last)
	return got
}

// reconciled waits until each of sts has subscribed to its deployment's
// notices and finished the reconcile that follows the subscription: from
// then on every change another replica makes reaches it as a notice, and
// none made before is told again.
func reconciled(t testing.TB, sts ...*Store) {
	t.Helper()
	for i, st := range sts {
		require.Eventually(t, func() bool { return st.reconciled.Load() > 0 }, watchdog, time.Millisecond, "the first reconcile of store %d", i)
	}
}

// park parks key through st at once (a permanent error).
func park(t testing.TB, st *Store, key string, now time.Time) share.Verdict {
	t.Helper()
	v, err := st.Judge(context.Background(), share.Judgment{Key: key, Ending: share.EndingPermanent,
		Incarnation: key + "#1", Cause: "fatal " + key, Now: now, Members: 1})
	require.NoError(t, err)
	require.True(t, v.NewPark, "%+v", v)
	return v
}

// heard waits (with the watchdog) until c has been told n changes.
func (c *told) heard(t testing.TB, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.got) >= n
	}, watchdog, time.Millisecond, "waiting for %d changes", n)
}

// Each park, resume, forget of a parked key and restored park is told to
// every replica that subscribes, the one that made it included (a call of
// it that gave up may still have been applied), once, with the version of
// the transition: every transition of a key takes the next version of the
// deployment, a forget of a key that is not parked too (told to none).
func TestNotices(t *testing.T) {
	s := redistest.Start(t)
	sts := replicasOn(t, s, 4, Options{ClientTime: true})
	var tolds [3]told
	cfg := ledgertest.Config()
	for i := range 3 {
		require.NoError(t, sts[i].Open(cfg, tolds[i].notify))
	}
	require.NoError(t, sts[3].Open(cfg, nil)) // no subscription
	reconciled(t, sts[:3]...)
	ctx := context.Background()
	now := ledgertest.T0

	require.Equal(t, int64(1), park(t, sts[0], "k", now).Park.Version)
	pe, v, err := sts[1].Resume(ctx, "k", 1, now)
	require.NoError(t, err)
	require.Equal(t, int64(1), pe.Version)
	require.Equal(t, int64(2), v)
	v, err = sts[2].Forget(ctx, "unparked", 0)
	require.NoError(t, err)
	require.Equal(t, int64(3), v)
	require.Equal(t, int64(4), park(t, sts[0], "k", now).Park.Version)
	_, err = sts[2].Forget(ctx, "k", 2)
	require.Equal(t, &share.ChangedError{Key: "k", Version: 4, Park: lookedUp(t, sts[2], "k")}, err)
	v, err = sts[2].Forget(ctx, "k", 4)
	require.NoError(t, err)
	require.Equal(t, int64(5), v)
	rs, err := sts[1].Restore(ctx, []*crashloop.ParkedError{{Key: "k2", Reason: crashloop.ReasonNeedsHuman, Attempts: 3,
		Since: now, LastError: errors.New("written back")}})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.True(t, rs[0].Written)
	require.Equal(t, int64(6), rs[0].Version)
	rs, err = sts[1].Restore(ctx, []*crashloop.ParkedError{{Key: "k2", Reason: crashloop.ReasonPermanent, Since: now}})
	require.NoError(t, err)
	require.False(t, rs[0].Written, "a key parked meanwhile keeps its park, and nothing is told")
	require.Equal(t, int64(6), rs[0].Version)
	require.Equal(t, crashloop.ReasonNeedsHuman, rs[0].Park.Reason)
	park(t, sts[3], "marker", now) // every subscriber sees it last

	marker := "+marker@7 permanent_error 0 fatal marker"
	want := []string{"+k@1 permanent_error 0 fatal k", "-k@2", "+k@4 permanent_error 0 fatal k", "-k@5",
		"+k2@6 needs_human 3 written back", marker}
	for i := range 3 {
		require.Equal(t, want, tolds[i].until(t, marker), "replica %d", i)
	}
}

// lookedUp returns the park of key as st looks it up.
func lookedUp(t *testing.T, st *Store, key string) *crashloop.ParkedError {
	t.Helper()
	ch, err := st.Lookup(context.Background(), key)
	require.NoError(t, err)
	require.NotNil(t, ch.Park)
	return ch.Park
}

// Notices are at most once: a Store whose subscription broke learns, when
// it subscribes again, the parks and resumes it missed.
func TestReconcileAfterALostSubscription(t *testing.T) {
	s := redistest.Start(t)
	sts := replicasOn(t, s, 2, Options{ClientTime: true})
	var c told
	cfg := ledgertest.Config()
	require.NoError(t, sts[0].Open(cfg, nil))
	require.NoError(t, sts[1].Open(cfg, c.notify))
	admin := s.Client(nil)
	reconciled(t, sts[1])
	park(t, sts[0], "k", ledgertest.T0)
	c.until(t, "+k@1 permanent_error 0 fatal k")

	ctx := context.Background()
	require.NoError(t, admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	// Changes no notice tells of: the subscription is gone, and the
	// resume below is made behind the Store's back.
	require.NoError(t, admin.Del(ctx, sts[0].keys.record("k")).Err())
	require.NoError(t, admin.SRem(ctx, sts[0].keys.parked(), "k").Err())
	park(t, sts[0], "k2", ledgertest.T0)

	c.heard(t, 3) // the reconcile after the new subscription
	park(t, sts[0], "marker", ledgertest.T0)
	got := c.until(t, "+marker@3 permanent_error 0 fatal marker")
	slices.Sort(got[1:3]) // the resume and the park may come in either order
	// the record deleted behind the Store's back left the key's version
	// as it was: the reconcile tells it with that version, which a
	// Supervisor that knows it already ignores
	require.Equal(t, []string{"+k@1 permanent_error 0 fatal k", "+k2@2 permanent_error 0 fatal k2", "-k@1", "+marker@3 permanent_error 0 fatal marker"}, got)
}

// pttl returns the time to live of key: -1 without one, -2 when it does
// not exist.
func pttl(t testing.TB, rdb *redis.Client, key string) time.Duration {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	return d
}

// Every key of a deployment is under its hash tag and expires on its own,
// but a park while it stands, and the fleet breaker and its held restarts
// while it is tripped.
func TestKeysAndExpiry(t *testing.T) {
	s := redistest.Start(t)
	st := replicasOn(t, s, 1, Options{ClientTime: true, Prefix: "deploy", MemberTTL: 30 * time.Second})[0]
	cfg := ledgertest.Config() // the longest span: the hourly cap's hour
	require.NoError(t, st.Open(cfg, nil))
	rdb := s.Client(nil)
	ctx := context.Background()
	keys := func() []string {
		ks, err := rdb.Keys(ctx, "*").Result()
		require.NoError(t, err)
		slices.Sort(ks)
		return ks
	}
	within := func(key string, span time.Duration) {
		t.Helper()
		d := pttl(t, rdb, key)
		require.Greater(t, d, span-time.Second, key)
		require.LessOrEqual(t, d, span, key)
	}

	j := share.Judgment{Key: "a", Ending: share.EndingFailedStart, Incarnation: "a#1", Cause: "boom", Now: ledgertest.T0, Members: 1}
	st.Member("a", true) // written before the judge step
	_, err := st.Judge(ctx, j)
	require.NoError(t, err)
	conf := st.plan.Load().key
	require.Regexp(t, `^\{deploy\}:cfg:[0-9a-f]{16}$`, conf)
	require.Equal(t, []string{conf, "{deploy}:epoch", "{deploy}:fleet", "{deploy}:k:a", "{deploy}:m:replica-0", "{deploy}:replicas"}, keys())
	require.Equal(t, time.Duration(-1), pttl(t, rdb, "{deploy}:epoch"), "the epoch never expires")
	require.Equal(t, time.Duration(-1), pttl(t, rdb, conf), "nor does a configuration")
	within("{deploy}:k:a", time.Hour+ttlGrace)
	within("{deploy}:fleet", time.Hour+cfg.Fleet.Cooldown+ttlGrace)
	within("{deploy}:m:replica-0", 30*time.Second)
	within("{deploy}:replicas", 30*time.Second)

	park(t, st, "a", ledgertest.T0)
	require.Equal(t, time.Duration(-1), pttl(t, rdb, "{deploy}:k:a"), "a park never expires")
	require.Equal(t, time.Duration(-1), pttl(t, rdb, "{deploy}:parked"))
	_, _, err = st.Resume(ctx, "a", 1, ledgertest.T0)
	require.NoError(t, err)
	require.Equal(t, []string{conf, "{deploy}:epoch", "{deploy}:fleet", "{deploy}:m:replica-0", "{deploy}:replicas", "{deploy}:seq", "{deploy}:ver"},
		keys(), "a resume drops the record, and keeps the key's version")
	require.Equal(t, time.Duration(-1), pttl(t, rdb, "{deploy}:seq"), "versions never expire")
	require.Equal(t, time.Duration(-1), pttl(t, rdb, "{deploy}:ver"))

	for i := range cfg.Fleet.RestartsPerHour + 1 { // the 8th trips; it and the 9th are held
		_, err := st.Judge(ctx, share.Judgment{Key: fmt.Sprintf("p%d", i), Ending: share.EndingPlanned, Incarnation: "i", Now: ledgertest.T0})
		require.NoError(t, err)
	}
	require.Equal(t, time.Duration(-1), pttl(t, rdb, "{deploy}:fleet"), "a tripped breaker never expires")
	require.Equal(t, time.Duration(-1), pttl(t, rdb, "{deploy}:held"))
	within("{deploy}:k:p8", time.Hour+ttlGrace)
	v, err := st.Proceed(ctx, "p8", ledgertest.T0.Add(time.Hour))
	require.NoError(t, err)
	require.NotNil(t, v.Rearmed)
	within("{deploy}:fleet", time.Hour+cfg.Fleet.Cooldown+ttlGrace)
	within("{deploy}:held", time.Hour+cfg.Fleet.Cooldown+ttlGrace)
	for _, k := range keys() {
		require.True(t, strings.HasPrefix(k, "{deploy}:"), k)
	}

	// A budget alone: the record and the deployment's time expire the
	// budget's window after the last step, whichever clock dates it.
	alone := ledgertest.Configs()["budget"]
	for _, clientTime := range []bool{true, false} {
		b := replicasOn(t, s, 1, Options{ClientTime: clientTime})[0]
		require.NoError(t, b.Open(alone, nil))
		_, err := b.Judge(ctx, j)
		require.NoError(t, err)
		within(b.keys.record("a"), alone.Budget.Window+ttlGrace)
		within(b.keys.fleet(), alone.Budget.Window+ttlGrace)
	}
}

// A replica's members are written as changes while the server's set is
// what the Store last wrote, and whole when it is not (it expired while the
// replica could not reach the server, or the server lost it); Close
// withdraws them.
func TestMembersWrittenWhole(t *testing.T) {
	s := redistest.Start(t)
	st := replicasOn(t, s, 1, Options{ClientTime: true})[0]
	require.NoError(t, st.Open(ledgertest.Config(), nil))
	rdb := s.Client(nil)
	ctx := context.Background()
	set := st.keys.member("replica-0")
	members := func() []string {
		ks, err := rdb.SMembers(ctx, set).Result()
		require.NoError(t, err)
		slices.Sort(ks)
		return ks
	}
	write := func() {
		t.Helper()
		require.NoError(t, st.writeMembers(ctx, false)) // or the refresher has: one write at a time
	}
	for _, key := range []string{"a", "b", "c"} {
		st.Member(key, true)
	}
	write()
	require.Equal(t, []string{"a", "b", "c"}, members())
	st.Member("b", false)
	write()
	require.Equal(t, []string{"a", "c"}, members())
	require.NoError(t, rdb.Del(ctx, set).Err()) // expired
	st.Member("d", true)
	write()
	require.Equal(t, []string{"a", "c", "d"}, members())
	f, err := st.Fleet(ctx, ledgertest.T0)
	require.NoError(t, err)
	require.Equal(t, 3, f.Keys)
	require.NoError(t, rdb.FlushAll(ctx).Err()) // the server lost its state: the step that finds it fails
	_, err = st.Fleet(ctx, ledgertest.T0)
	var sl *share.StateLostError
	require.ErrorAs(t, err, &sl)
	f, err = st.Fleet(ctx, ledgertest.T0) // the next writes the members whole first
	require.NoError(t, err)
	require.Equal(t, 3, f.Keys)
	require.Equal(t, []string{"a", "c", "d"}, members())
	require.NoError(t, st.Close())
	require.Zero(t, rdb.Exists(ctx, set, st.keys.replicas()).Val(), "withdrawn at Close")
	st.Member("e", true) // after Close: nothing
	write()
	require.Zero(t, rdb.Exists(ctx, set).Val())
}

// Operator tools use a Store they do not open: Parked, Lookup, Resume and
// Fleet work, the last with what the replicas stored; Judge and Proceed
// refuse; nothing they do moves the deployment's clock.
func TestOperatorWithoutOpen(t *testing.T) {
	s := redistest.Start(t)
	sts := replicasOn(t, s, 2, Options{ClientTime: true})
	replica, op := sts[0], sts[1]
	cfg := ledgertest.Config()
	require.NoError(t, replica.Open(cfg, nil))
	replica.Member("k", true) // written by the first Judge
	replica.Member("p7", true)
	ctx := context.Background()
	for i := range cfg.Fleet.RestartsPerHour {
		_, err := replica.Judge(ctx, share.Judgment{Key: fmt.Sprintf("p%d", i), Ending: share.EndingPlanned, Incarnation: "i", Now: ledgertest.T0})
		require.NoError(t, err)
	}
	parked := park(t, replica, "k", ledgertest.T0.Add(time.Second)).Park

	parks, err := op.Parked(ctx)
	require.NoError(t, err)
	require.Len(t, parks, 1)
	require.Equal(t, parkString(parked), parkString(parks[0]))
	ch, err := op.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, parkString(parked), parkString(ch.Park))

	later := ledgertest.T0.Add(10 * time.Second)
	f, err := op.Fleet(ctx, later)
	require.NoError(t, err)
	rearm := ledgertest.T0.Add(cfg.Fleet.Cooldown)
	require.Equal(t, fleetString(crashloop.FleetStatus{BreakerTripped: true, FleetRestartsPerHour: 8, FailingKeys: 1,
		Keys: 2, RestartsInHour: 8, RearmAt: &rearm}), fleetString(f))
	want, err := replica.Fleet(ctx, later)
	require.NoError(t, err)
	require.Equal(t, fleetString(want), fleetString(f), "the operator sees what the replica sees")
	f, err = op.Fleet(ctx, rearm)
	require.NoError(t, err)
	require.False(t, f.BreakerTripped, "due to re-arm: reads as re-armed")

	// The operator's reads at later times did not move the clock: the
	// replica still decides at its own.
	v, err := replica.Proceed(ctx, "p7", ledgertest.T0.Add(11*time.Second))
	require.NoError(t, err)
	require.True(t, v.Held)
	require.Equal(t, cfg.Fleet.Cooldown-11*time.Second, v.Wait)

	_, err = op.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingCrash, Now: later})
	require.ErrorIs(t, err, errNotOpen)
	_, err = op.Proceed(ctx, "k", later)
	require.ErrorIs(t, err, errNotOpen)

	pe, rv, err := op.Resume(ctx, "k", ch.Park.Version, later)
	require.NoError(t, err)
	require.Equal(t, parkString(parked), parkString(pe))
	_, _, err = op.Resume(ctx, "k", ch.Park.Version, later)
	require.ErrorIs(t, err, crashloop.ErrNotParked)
	require.Equal(t, &share.ChangedError{Key: "k", Version: rv}, err)
	ch, err = replica.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, share.Change{Key: "k", Version: rv}, ch)

	empty := New(s.Client(nil), Options{Prefix: newPrefix()})
	f, err = empty.Fleet(ctx, later)
	require.NoError(t, err)
	require.Equal(t, crashloop.FleetStatus{}, f, "a deployment with no breaker stored")
}

func TestOpenRefuses(t *testing.T) {
	s := redistest.Start(t)
	cfg := ledgertest.Config()
	st := New(s.Client(nil), Options{Prefix: newPrefix()})
	require.NoError(t, st.Open(cfg, nil))
	require.ErrorContains(t, st.Open(cfg, nil), "open already")
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "idempotent")

	closed := New(s.Client(nil), Options{Prefix: newPrefix()})
	require.NoError(t, closed.Close())
	require.ErrorContains(t, closed.Open(cfg, nil), "closed")

	for _, ttl := range []time.Duration{-time.Second, time.Microsecond} {
		bad := New(s.Client(nil), Options{Prefix: newPrefix(), MemberTTL: ttl})
		require.ErrorContains(t, bad.Open(cfg, nil), "redisstore: Options.MemberTTL "+ttl.String()+": must be 0 (the default, 1m0s) or at least 1ms")
		_, err := bad.Fleet(context.Background(), time.Now())
		require.ErrorContains(t, err, "Options.MemberTTL")
	}

	bad := New(s.Client(nil), Options{Prefix: "a{b}"})
	require.ErrorContains(t, bad.Open(cfg, nil), `key prefix "a{b}"`)
	_, err := bad.Parked(context.Background())
	require.ErrorContains(t, err, `key prefix "a{b}"`)

	long := cfg
	long.Fleet = &crashloop.FleetConfig{RestartsPerHour: 1, FailingFraction: 1, MinFailing: 1, Cooldown: 105 * 24 * time.Hour}
	require.ErrorContains(t, New(s.Client(nil), Options{Prefix: newPrefix()}).Open(long, nil), "fleet cooldown")
}

func TestDefaults(t *testing.T) {
	st := New(nil, Options{})
	require.Equal(t, "crashloop", st.o.Prefix)
	require.Equal(t, DefaultTimeout, st.o.Timeout)
	require.Equal(t, time.Minute, st.o.MemberTTL)
	require.Regexp(t, `^.+-[0-9]+-[0-9a-f]{8}$`, st.o.Replica)
	require.NotEqual(t, st.o.Replica, New(nil, Options{}).o.Replica, "each Store a replica of its own")
	require.Equal(t, "{crashloop}:k:worker", st.keys.record("worker"))
}

func TestDecodeNotice(t *testing.T) {
	ch, epoch, origin, ok := decodeNotice("P2:e13:abc5:k:{x}00000000000000072,9,11:needs_humanecause: with, and 1:2")
	require.True(t, ok)
	require.Equal(t, "e1", epoch)
	require.Equal(t, "abc", origin)
	require.Equal(t, "k:{x}", ch.Key)
	require.Equal(t, `k:{x}{needs_human 2 cause: with, and 1:2}`, fmt.Sprintf("%s{%s %d %s}", ch.Key, ch.Park.Reason, ch.Park.Attempts, ch.Park.LastError))
	require.ErrorIs(t, ch.Park, crashloop.ErrNeedsHuman)
	require.Equal(t, int64(7), ch.Park.Since.UnixMicro())
	require.Equal(t, int64(9), ch.Park.Version)
	require.Equal(t, int64(9), ch.Version)
	ch, epoch, origin, ok = decodeNotice("R2:e21:o1:k12")
	require.True(t, ok)
	require.Equal(t, share.Change{Key: "k", Version: 12}, ch)
	require.Equal(t, "e2", epoch)
	require.Equal(t, "o", origin)
	for _, bad := range []string{"", "X1:e1:o1:k3", "R1:e", "R1:e1:o", "R1:e1:o1:k", "R1:e1:o1:kx", "R1:e1:o1:k0", "R1:e1:o1:k-1", "P1:e1:o1:k",
		"P1:e1:o1:k0000000000000007x,1,1:r", "P1:e1:o1:k00000000000000071,1,0:", "P1:e1:o1:k00000000000000071,1,1:rX",
		"P1:e1:o1:k00000000000000071,1,5:r", "P1:e1:o1:k00000000000000071,1:r", "P1:e1:o1:k00000000000000071,x,1:r",
		"P1:e1:o1:k00000000000000071,-1,1:r", "R1:o1:k12"} {
		_, _, _, ok := decodeNotice(bad)
		require.False(t, ok, "%q", bad)
	}
}

// parkString and fleetString write what a replica can tell of a park and
// of the fleet, with times from ledgertest.T0, for comparisons that ignore
// a time's location.
func parkString(pe *crashloop.ParkedError) string {
	if pe == nil {
		return "-"
	}
	return fmt.Sprintf("%s{%s %d %s %v nh=%v v%d}", pe.Key, pe.Reason, pe.Attempts, pe.Since.Sub(ledgertest.T0), pe.LastError,
		errors.Is(pe, crashloop.ErrNeedsHuman), pe.Version)
}

func fleetString(st crashloop.FleetStatus) string {
	rearm := "-"
	if st.RearmAt != nil {
		rearm = st.RearmAt.Sub(ledgertest.T0).String()
	}
	return fmt.Sprintf("%v %d %d/%d %d %s", st.BreakerTripped, st.FleetRestartsPerHour, st.FailingKeys, st.Keys, st.RestartsInHour, rearm)
}
