package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/suptest"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// A misconfigured server is told apart from an outage, against a real
// redis-server: each cause is announced once as store.misconfigured, the
// replica decides alone meanwhile, never announces store.unavailable, and
// does not flap between store.recovered and a new failure.

// misconfigured starts one replica on s with a client of options o, whose
// Store checks the server every 20ms, on a mock clock.
func misconfigured(t *testing.T, s *redistest.Server, o *redis.Options) (*replica, *redis.Client) {
	t.Helper()
	c := s.Client(BoundedOptions(o, 5*time.Second))
	t.Cleanup(func() { _ = c.Close() })
	prefix := newPrefix()
	r := fleet(t, 1, crashloop.DefaultSupervisorConfig(), true, func(int) *Store {
		st := New(c, Options{Prefix: prefix, Replica: "replica-0", Timeout: 5 * time.Second, ClientTime: true})
		st.checks = 20 * time.Millisecond
		return st
	})[0]
	return r, c
}

// onlyMisconfigured requires exactly one store.misconfigured event, for
// cause, and no store.unavailable or store.recovered.
func onlyMisconfigured(t *testing.T, r *replica, cause string) {
	t.Helper()
	evs := r.evs.of(crashloop.EventStoreMisconfigured)
	require.Len(t, evs, 1, "announced once")
	require.Equal(t, cause, evs[0].Reason)
	var me *MisconfiguredError
	require.ErrorAs(t, evs[0].LastError, &me)
	require.Equal(t, cause, me.Cause)
	require.ErrorIs(t, evs[0].LastError, share.ErrMisconfigured)
	require.Empty(t, r.evs.of(crashloop.EventStoreUnavailable), "no outage")
	require.Empty(t, r.evs.of(crashloop.EventStoreRecovered), "no flapping")
}

// A maxmemory with an evicting policy is found by the Store's own check:
// the replica decides alone (nothing reaches the server) until the policy
// is noeviction, then writes its park back.
func TestMisconfiguredEvictionPolicy(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-ttl"} {
		t.Run(policy, func(t *testing.T) {
			s := redistest.Start(t)
			admin := testClient(t, s)
			ctx := context.Background()
			require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "1000000000").Err())
			require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", policy).Err())
			r, _ := misconfigured(t, s, nil)
			require.Eventually(t, func() bool { return r.store.found.Load() != nil }, watchdog, time.Millisecond)

			warning, err := r.store.Check(ctx)
			require.Empty(t, warning)
			var me *MisconfiguredError
			require.ErrorAs(t, err, &me)
			require.Equal(t, &MisconfiguredError{Cause: CauseEviction, Detail: "maxmemory is 1000000000 with maxmemory-policy " + policy +
				", which may evict the store's parks and windows: set maxmemory-policy noeviction (or maxmemory 0)"}, me)

			for range 3 {
				d := r.sup.Decide(ctx, "k", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))})
				require.ErrorIs(t, d.Err, crashloop.ErrParked, "parked alone")
				r.clock.Add(time.Second)
			}
			onlyMisconfigured(t, r, CauseEviction)
			n, err := admin.Exists(ctx, "{"+r.store.o.Prefix+"}:parked").Result()
			require.NoError(t, err)
			require.Equal(t, int64(0), n, "no step wrote to a server that may evict it")

			require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
			require.Eventually(t, func() bool { return r.store.found.Load() == nil }, watchdog, time.Millisecond)
			require.NoError(t, layerOf(r.sup).Flush(ctx))
			require.Len(t, r.evs.of(crashloop.EventStoreRecovered), 1)
			parks, err := r.store.Parked(ctx)
			require.NoError(t, err)
			require.Len(t, parks, 1)
			require.Equal(t, "k", parks[0].Key, "the park written back")
		})
	}
}

// A server at its maxmemory with noeviction refuses writes but answers
// reads: the replica says misconfigured (oom) once, and neither recovers
// nor fails anew every second; once the server takes writes it recovers.
func TestMisconfiguredOOMDoesNotFlap(t *testing.T) {
	s := redistest.Start(t)
	admin := testClient(t, s)
	ctx := context.Background()
	r, _ := misconfigured(t, s, nil)
	boom := crashloop.RunResult{Err: errors.New("exit 1")}
	d := r.sup.Decide(ctx, "k", boom)
	require.Equal(t, crashloop.ActionRestart, d.Action)
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "1").Err())

	for i := range 5 {
		r.clock.Add(time.Second) // each decision asks the server again
		require.Equal(t, crashloop.ActionRestart, r.sup.Decide(ctx, fmt.Sprint("k", i), boom).Action)
		_, err := r.store.Lookup(ctx, "k")
		require.NoError(t, err, "reads still work")
	}
	onlyMisconfigured(t, r, CauseOOM)
	require.Contains(t, r.evs.of(crashloop.EventStoreMisconfigured)[0].LastError.Error(), "OOM command not allowed")

	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "0").Err())
	r.clock.Add(time.Second)
	require.Equal(t, crashloop.ActionRestart, r.sup.Decide(ctx, "k5", boom).Action)
	require.Len(t, r.evs.of(crashloop.EventStoreRecovered), 1)
	require.Len(t, r.evs.of(crashloop.EventStoreMisconfigured), 1)
}

// An ACL user without the deployment's channel (Redis 7's resetchannels
// default) is found by the check before its first park, even one made at
// once: the park is made alone, and the server holds no half of it (no parked set without its
// record's notice).
func TestMisconfiguredChannelPermission(t *testing.T) {
	s := redistest.Start(t)
	admin := testClient(t, s)
	ctx := context.Background()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "nochan", "on", ">pw", "~*", "+@all", "resetchannels").Err())
	r, _ := misconfigured(t, s, &redis.Options{Username: "nochan", Password: "pw"})
	// The first decision, at once: it checks first if the Store's own
	// check has not ended yet.

	d := r.sup.Decide(ctx, "k", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))})
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	onlyMisconfigured(t, r, CausePermission)
	me := r.evs.of(crashloop.EventStoreMisconfigured)[0].LastError
	require.ErrorContains(t, me, "the channel &{"+r.store.o.Prefix+"}:events")
	require.True(t, redis.IsPermissionError(me), "the server's NOPERM: %v", me)
	n, err := admin.Exists(ctx, "{"+r.store.o.Prefix+"}:parked").Result()
	require.NoError(t, err)
	require.Equal(t, int64(0), n, "no half-made park")
	err = r.sup.Resume(ctx, "k")
	require.ErrorIs(t, err, share.ErrMisconfigured)
	require.ErrorIs(t, err, share.ErrUnavailable)
}

// A wrong password and a user that may not run scripts fail every call at
// once with their own cause.
func TestMisconfiguredCredentials(t *testing.T) {
	s := redistest.Start(t)
	admin := testClient(t, s)
	ctx := context.Background()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "noscript", "on", ">pw", "~*", "&*", "+@all", "-evalsha", "-eval").Err())
	for _, tc := range []struct {
		name  string
		o     *redis.Options
		cause string
		text  string
	}{
		{"wrong password", &redis.Options{Username: "noscript", Password: "wrong"}, CauseAuth, "WRONGPASS"},
		{"no script permission", &redis.Options{Username: "noscript", Password: "pw"}, CausePermission, "NOPERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := misconfigured(t, s, tc.o)
			boom := crashloop.RunResult{Err: errors.New("exit 1")}
			for i := range 3 {
				require.Equal(t, crashloop.ActionRestart, r.sup.Decide(ctx, fmt.Sprint("k", i), boom).Action)
				r.clock.Add(time.Second)
			}
			onlyMisconfigured(t, r, tc.cause)
			require.ErrorContains(t, r.evs.of(crashloop.EventStoreMisconfigured)[0].LastError, tc.text)
		})
	}
}

// classify names each cause, and leaves an outage alone: the errors as a
// real server sends them (a script's error reply with the server's text).
func TestClassify(t *testing.T) {
	s := redistest.Start(t)
	c := testClient(t, s)
	st := New(c, Options{Prefix: "p"})
	proto := func(msg string) error {
		err := c.Eval(context.Background(), "return redis.error_reply(ARGV[1])", nil, msg).Err()
		require.Error(t, err)
		return err
	}
	for _, tc := range []struct {
		err   error
		cause string
	}{
		{proto("WRONGPASS invalid username-password pair or user is disabled."), CauseAuth},
		{proto("NOAUTH Authentication required."), CauseAuth},
		{proto("NOPERM this user has no permissions to run the 'evalsha' command"), CausePermission},
		{proto("ERR The user executing the script can't publish to the channel mentioned in the command script: x"), CausePermission},
		{proto("OOM command not allowed when used memory > 'maxmemory'."), CauseOOM},
		{proto("MOVED 3999 127.0.0.1:6381"), CauseMoved},
	} {
		err := st.classify(fmt.Errorf("wrapped: %w", tc.err))
		var me *MisconfiguredError
		require.ErrorAs(t, err, &me, "%v", tc.err)
		require.Equal(t, tc.cause, me.Cause)
		require.ErrorIs(t, err, share.ErrMisconfigured)
		require.ErrorIs(t, err, tc.err)
	}
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	require.Equal(t, refused, st.classify(refused))
	require.NoError(t, st.classify(nil))
}

// A record of the text format of the build before the packed one (a
// replica of an older build on the same prefix) fails the step loudly, as
// store.misconfigured with cause "format", and is never misread: the
// replica decides alone, and the record stays as it was.
func TestRecordOfAnotherFormat(t *testing.T) {
	// restarts 3, two respawns: the text header
	anotherFormat(t, keyspace.record, "3,0,2,0,0,0,0,0;17961829000000001796182900500000", "crashloop: record_format")
}

// So does a fleet string of the text format before the packed hour, as
// that build wrote it after two granted restarts of the default guards.
func TestFleetOfAnotherFormat(t *testing.T) {
	anotherFormat(t, func(k keyspace, _ string) string { return k.fleet() },
		"17961829050000000000000000000000040,120000000000,0,0,0,\n17961829000000001796182905000000", "crashloop: fleet_format")
}

// And a fleet string of format 2, whose hour held 8-byte times (before they
// were 4 bytes, each a time mod 2^32), as that build wrote it after two
// granted restarts of the default guards.
func TestFleetOfFormat2(t *testing.T) {
	anotherFormat(t, func(k keyspace, _ string) string { return k.fleet() },
		"\x0217961829050000000000000000000000040,120000000000,0,0,0,\n"+
			"\x00\x06\x61\x9a\x4c\x86\x5e\x80\x00\x06\x61\x9a\x4d\x1f\x3e\x40", "crashloop: fleet_format")
}

// anotherFormat writes old under the key that key names for the key "k",
// and requires a failed start of "k" to be decided alone, announced as
// store.misconfigured with cause "format" and the server's text, and old
// not to be rewritten.
func anotherFormat(t *testing.T, key func(keyspace, string) string, old, text string) {
	s := redistest.Start(t)
	admin := testClient(t, s)
	ctx := context.Background()
	r, _ := misconfigured(t, s, nil)
	rk := key(r.store.keys, "k")
	require.NoError(t, admin.Set(ctx, rk, old, 0).Err())

	d := r.sup.Decide(ctx, "k", crashloop.RunResult{Err: errors.New("exit 1")})
	require.Equal(t, crashloop.ActionRestart, d.Action, "decided alone: one respawn of a fresh budget")
	onlyMisconfigured(t, r, CauseFormat)
	require.ErrorContains(t, r.evs.of(crashloop.EventStoreMisconfigured)[0].LastError, text)
	got, err := admin.Get(ctx, rk).Result()
	require.NoError(t, err)
	require.Equal(t, old, got, "not rewritten")
}

// A record of the packed format before the probe and the cause (2), and a
// cause table of another format, fail the step loudly (cause "format") and
// are never misread or rewritten.
func TestFormatsBeforeProbesRefused(t *testing.T) {
	s := redistest.Start(t)
	admin := testClient(t, s)
	ctx := context.Background()
	for name, bad := range map[string]func(*Store) (string, string){
		"record of format 2":      func(st *Store) (string, string) { return st.keys.record("k"), "\x02" + strings.Repeat("\x00", 32) },
		"cause table of format 0": func(st *Store) (string, string) { return st.keys.causes(), "0" },
	} {
		t.Run(name, func(t *testing.T) {
			st := replicasOn(t, s, 1, Options{ClientTime: true})[0]
			require.NoError(t, st.Open(suptest.CauseConfig(), nil))
			_, err := st.Lookup(ctx, "other") // learns the epoch
			require.NoError(t, err)
			key, old := bad(st)
			if key == st.keys.causes() {
				require.NoError(t, admin.HSet(ctx, key, ".", old).Err())
			} else {
				require.NoError(t, admin.Set(ctx, key, old, 0).Err())
			}
			before := dump(t, admin, st.keys.tag)
			_, err = st.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingFailedStart, Incarnation: "k#1",
				Shared: "db refused", Now: start})
			var me *MisconfiguredError
			require.ErrorAs(t, err, &me)
			require.Equal(t, CauseFormat, me.Cause)
			require.ErrorContains(t, err, "crashloop: record_format")
			after := dump(t, admin, st.keys.tag)
			delete(before, st.plan.Load().key) // the configuration, written by the step's first try
			delete(after, st.plan.Load().key)
			require.Equal(t, before, after, "nothing written")
		})
	}
}
