package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Connect reaches every shape of deployment: a plain server, a cluster
// node (detected), and TLS with a CA file and a client certificate; its
// errors never show a password.

// TLS with a CA file and a client certificate reaches a server that asks
// for one, and a Store decides on it; without the certificate, or with
// another CA, it does not.
func TestConnectTLS(t *testing.T) {
	p := redistest.NewPKI(t)
	s := redistest.Start(t, redistest.WithTCP(), redistest.WithTLS(p.Server()))
	ctx := context.Background()
	url := "rediss://" + s.TLSAddr()
	connect := func(o ClientOptions) (redis.UniversalClient, error) {
		o.Timeout = 5 * time.Second
		c, err := Connect(ctx, url, o)
		if c != nil {
			t.Cleanup(func() { _ = c.Close() })
		}
		return c, err
	}

	c, err := connect(ClientOptions{CAFile: p.CA, CertFile: p.ClientCert, KeyFile: p.ClientKey})
	require.NoError(t, err)
	require.IsType(t, &redis.Client{}, c)
	require.Equal(t, "PONG", c.Ping(ctx).Val())
	st := New(c, Options{Prefix: newPrefix(), Timeout: 5 * time.Second})
	t.Cleanup(func() { _ = st.Close() })
	require.NoError(t, st.Open(crashloop.DefaultSupervisorConfig(), nil))
	v, err := st.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingFailedStart})
	require.NoError(t, err)
	require.Equal(t, 1, v.Attempt)

	c, err = connect(ClientOptions{CAFile: p.CA})
	require.NoError(t, err)
	require.Error(t, c.Ping(ctx).Err(), "the server asks for a client certificate")

	c, err = connect(ClientOptions{CAFile: p.OtherCA, CertFile: p.ClientCert, KeyFile: p.ClientKey})
	require.NoError(t, err)
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, c.Ping(ctx).Err(), &unknown)

	for _, tc := range []struct {
		url  string
		o    ClientOptions
		want string
	}{
		{"redis://" + s.Addr(), ClientOptions{CAFile: p.CA}, "a CA file or client certificate needs a rediss:// URL"},
		{url, ClientOptions{CertFile: p.ClientCert}, "a client certificate needs both its certificate file and its key file"},
		{url, ClientOptions{CAFile: p.ServerKey}, "CA file " + p.ServerKey + ": no PEM certificate in it"},
		{url, ClientOptions{CAFile: filepath.Join(t.TempDir(), "missing.pem")}, "CA file: open "},
		{url, ClientOptions{CertFile: p.ClientCert, KeyFile: p.CA}, "client certificate: "},
	} {
		_, err := Connect(ctx, tc.url, tc.o)
		require.ErrorContains(t, err, tc.want)
	}
	var _ *tls.Config // the client certificate travels in redis.Options.TLSConfig
}

// A plain URL of a cluster node gives a cluster client; of a plain server,
// a plain client; of a server that cannot be reached, a plain client.
func TestConnectDetectsACluster(t *testing.T) {
	ctx := context.Background()
	cl := redistest.Start(t, redistest.WithTCP(), redistest.WithCluster())
	c, err := Connect(ctx, cl.URL(), ClientOptions{Timeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.IsType(t, &redis.ClusterClient{}, c)
	st := New(c, Options{Prefix: newPrefix(), Timeout: 5 * time.Second})
	t.Cleanup(func() { _ = st.Close() })
	require.NoError(t, st.Open(crashloop.DefaultSupervisorConfig(), nil))
	v, err := st.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingFailedStart})
	require.NoError(t, err)
	require.Equal(t, 1, v.Attempt)

	plain := redistest.Start(t)
	c, err = Connect(ctx, plain.URL(), ClientOptions{Timeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.IsType(t, &redis.Client{}, c)

	c, err = Connect(ctx, "unix://"+filepath.Join(t.TempDir(), "none.sock"), ClientOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.IsType(t, &redis.Client{}, c)
}

// No URL form shows a password in an error: user:password@, ?password=,
// the failover URL's ?sentinel_password=, the password given apart, and a
// URL that cannot be parsed.
func TestConnectNeverShowsAPassword(t *testing.T) {
	ctx := context.Background()
	const secret = "s3cr3t-Pw"
	for _, raw := range []string{
		"redis://user:" + secret + "@host:6379/notadb",
		"redis://host:6379/notadb?password=" + secret,
		"redis://host:6379/0?password=" + secret + "&bogus=1",
		"redis://user:" + secret + "@s1:26379/notadb?master_name=m",
		"redis://s1:26379/0?master_name=m&password=" + secret + "&bogus=1",
		"redis://s1:26379/0?master_name=m&sentinel_password=" + secret + "&bogus=1",
		"rediss://user:" + secret + "@host:6379/0?bogus=1",
		"redis://user:" + secret + "@host:6379/%zz",
		"ftp://user:" + secret + "@host/",
		"redis://host:6379/0?bogus=" + secret,
	} {
		_, err := Connect(ctx, raw, ClientOptions{Password: secret})
		require.Error(t, err, raw)
		require.NotContains(t, err.Error(), secret, raw)
		_, err = NewClient(raw, secret, time.Second)
		require.Error(t, err, raw)
		require.NotContains(t, err.Error(), secret, raw)
	}
	_, err := Connect(ctx, "redis://host:6379/0?bogus=1", ClientOptions{})
	require.EqualError(t, err, `redisstore: Redis URL redis://host:6379/0?bogus=1: redis: unexpected option: bogus`)
	_, err = Connect(ctx, "redis://u:pw@host:6379/0?password=pw2&bogus=1", ClientOptions{})
	require.EqualError(t, err, `redisstore: Redis URL redis://u:xxxxx@host:6379/0?bogus=1&password=xxxxx: redis: unexpected option: bogus, password`)
	require.False(t, errors.Is(err, share.ErrMisconfigured))
}

// A Supervisor on a 3-master cluster, reached by Connect with one node's
// plain URL, survives the death of the master of its slot: it decides alone
// (store.unavailable) while the replica takes over, then uses the promoted
// replica (store.recovered), where its park stands.
func TestConnectClusterFailover(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	c, err := Connect(ctx, cl.URL(), ClientOptions{Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.IsType(t, &redis.ClusterClient{}, c)
	prefix := newPrefix()
	for cl.Owner(t, "{"+prefix+"}") != cl.Masters[0] {
		prefix = newPrefix() // the seed of the client's map of slots dies too
	}
	r := fleet(t, 1, crashloop.DefaultSupervisorConfig(), true, func(int) *Store {
		return New(c, Options{Prefix: prefix, Replica: "replica-0", Timeout: 300 * time.Millisecond, ClientTime: true})
	})[0]
	d := r.sup.Decide(ctx, "p", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))})
	require.ErrorIs(t, d.Err, crashloop.ErrParked)

	owner := cl.Owner(t, "{"+prefix+"}")
	oc := redis.NewClient(owner.Options(nil))
	require.Equal(t, int64(1), oc.Wait(ctx, 1, 5*time.Second).Val(), "the replica has the park")
	_ = oc.Close()
	owner.Kill()
	killed := time.Now()

	boom := crashloop.RunResult{Err: errors.New("exit 1")}
	i := 0
	require.Eventually(t, func() bool {
		r.clock.Add(time.Second) // ask the store at every decision
		i++
		r.sup.Decide(ctx, fmt.Sprint("k", i), boom)
		return len(r.evs.of(crashloop.EventStoreRecovered)) == 1
	}, 20*time.Second, 10*time.Millisecond)
	t.Logf("back %v after the kill, %d decisions", time.Since(killed), i)
	require.Len(t, r.evs.of(crashloop.EventStoreUnavailable), 1)
	require.Empty(t, r.evs.of(crashloop.EventStoreMisconfigured))
	pe, err := r.store.Lookup(ctx, "p")
	require.NoError(t, err)
	require.NotNil(t, pe, "the park stands on the promoted replica")
	require.Equal(t, "p", pe.Key)
}

// A Supervisor reached through Sentinel (Connect with a failover URL)
// survives its master's death: the sentinel promotes the replica, and the
// Supervisor uses it, where its park stands.
func TestConnectSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	ctx := context.Background()
	c, err := Connect(ctx, s.URL(), ClientOptions{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.IsType(t, &redis.Client{}, c)
	r := fleet(t, 1, crashloop.DefaultSupervisorConfig(), true, func(int) *Store {
		return New(c, Options{Prefix: newPrefix(), Replica: "replica-0", Timeout: time.Second, ClientTime: true})
	})[0]
	d := r.sup.Decide(ctx, "p", crashloop.RunResult{Err: crashloop.Permanent(errors.New("bad config"))})
	require.ErrorIs(t, d.Err, crashloop.ErrParked)
	mc := redis.NewClient(s.Master.Options(nil))
	require.Equal(t, int64(1), mc.Wait(ctx, 1, 5*time.Second).Val(), "the replica has the park")
	_ = mc.Close()
	s.Master.Kill()
	killed := time.Now()

	boom := crashloop.RunResult{Err: errors.New("exit 1")}
	i := 0
	require.Eventually(t, func() bool {
		r.clock.Add(time.Second)
		i++
		r.sup.Decide(ctx, fmt.Sprint("k", i), boom)
		return len(r.evs.of(crashloop.EventStoreRecovered)) == 1
	}, 30*time.Second, 10*time.Millisecond)
	t.Logf("back %v after the kill, %d decisions", time.Since(killed), i)
	require.Len(t, r.evs.of(crashloop.EventStoreUnavailable), 1)
	require.Empty(t, r.evs.of(crashloop.EventStoreMisconfigured))
	pe, err := r.store.Lookup(ctx, "p")
	require.NoError(t, err)
	require.NotNil(t, pe, "the park stands on the promoted replica")
}

// When the slot of a deployment moves to another master, the server drops
// the sharded subscriptions of its channel (it sends SUNSUBSCRIBE); the
// store subscribes again, at the new owner, and hears the parks made after
// the move.
func TestNoticesFollowASlotMigration(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	prefix := newPrefix()
	var sts []*Store
	for i := range 2 {
		c, err := Connect(ctx, cl.URL(), ClientOptions{Timeout: 5 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.IsType(t, &redis.ClusterClient{}, c)
		st := New(c, Options{Prefix: prefix, Replica: fmt.Sprint("replica-", i), Timeout: 5 * time.Second, ClientTime: true})
		t.Cleanup(func() { _ = st.Close() })
		sts = append(sts, st)
	}
	var heard told
	require.NoError(t, sts[0].Open(crashloop.DefaultSupervisorConfig(), nil))
	require.NoError(t, sts[1].Open(crashloop.DefaultSupervisorConfig(), heard.notify))
	reconciled(t, sts[1])
	park(t, sts[0], "before", start)
	heard.heard(t, 1)

	src := cl.Owner(t, "{"+prefix+"}")
	dst := cl.Masters[(cl.Index(src)+1)%3]
	admin := func(s *redistest.Server) *redis.Client {
		c := redis.NewClient(s.Options(nil))
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	sc, dc := admin(src), admin(dst)
	slot, err := sc.ClusterKeySlot(ctx, "{"+prefix+"}").Result()
	require.NoError(t, err)
	srcID, err := sc.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	dstID, err := dc.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	require.NoError(t, dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	require.NoError(t, sc.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	keys, err := sc.ClusterGetKeysInSlot(ctx, int(slot), 1000).Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	host, port, _ := net.SplitHostPort(dst.Addr())
	args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	require.NoError(t, sc.Do(ctx, args...).Err())
	for _, m := range cl.Masters {
		require.NoError(t, admin(m).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	}
	before := sts[1].reconciled.Load()
	require.Eventually(t, func() bool { return sts[1].reconciled.Load() > before }, watchdog, time.Millisecond,
		"subscribed again after the move")

	park(t, sts[0], "after", start)
	after := "+after@2 permanent_error 0 fatal after"
	require.Eventually(t, func() bool {
		heard.mu.Lock()
		defer heard.mu.Unlock()
		return slices.Contains(heard.got, after)
	}, watchdog, time.Millisecond, "the park made after the move reached the other replica")
	heard.mu.Lock()
	defer heard.mu.Unlock()
	// The reconcile after the new subscription tells the parks that stand
	// again (a Supervisor's mirror ignores a version it knows): what was
	// heard, each once, is the two parks, in order.
	require.Equal(t, []string{"+before@1 permanent_error 0 fatal before", after}, slices.Compact(slices.Clone(heard.got)))
}

// One deadline bounds a whole decision: a write-back that takes most of the
// timeout leaves the judge step only the rest, so the decision ends by the
// timeout (decided alone), not after a write-back and a judge step of a
// timeout each.
func TestOneDeadlineForADecision(t *testing.T) {
	const timeout, delay = 400 * time.Millisecond, 250 * time.Millisecond
	s := redistest.Start(t)
	p := redistest.NewSlowProxy(t, s, 0)
	c := redis.NewClient(p.Options(BoundedOptions(nil, timeout)))
	t.Cleanup(func() { _ = c.Close() })
	r := fleet(t, 1, crashloop.DefaultSupervisorConfig(), true, func(int) *Store {
		return New(c, Options{Prefix: newPrefix(), Replica: "replica-0", Timeout: timeout, ClientTime: true})
	})[0]
	boom := crashloop.RunResult{Err: errors.New("exit 1")}
	require.Equal(t, crashloop.ActionRestart, r.sup.Decide(context.Background(), "k", boom).Action)

	p.SetDelay(time.Hour) // an outage: the next decision is made alone
	r.sup.Decide(context.Background(), "k", boom)
	require.Len(t, r.evs.of(crashloop.EventStoreUnavailable), 1)

	p.SetDelay(delay) // slow: a write-back (one reply) and a judge step (one more) take 2×delay > timeout
	pctx, cancel := context.WithTimeout(context.Background(), watchdog)
	defer cancel()
	require.NoError(t, c.Ping(pctx).Err(), "a connection in the pool: the write-back pays no handshake")
	r.clock.Add(time.Second)
	began := time.Now()
	d := r.sup.Decide(context.Background(), "k", boom)
	took := time.Since(began)
	t.Logf("write-back and judge step: %v", took)
	require.Equal(t, crashloop.ActionRestart, d.Action)
	require.GreaterOrEqual(t, took, timeout)
	require.Less(t, took, timeout+delay/4, "one deadline, not a timeout for each call")
	require.Len(t, r.evs.of(crashloop.EventStoreRecovered), 1, "the write-back went through")
	unavailable := r.evs.of(crashloop.EventStoreUnavailable)
	require.Len(t, unavailable, 2, "the judge step ran out of the decision's time")
	require.ErrorIs(t, unavailable[1].LastError, context.DeadlineExceeded)
}
