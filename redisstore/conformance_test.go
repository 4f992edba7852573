package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/crashloopguard/crashloop/share/ledgertest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

var prefixSeq atomic.Int64

// newPrefix returns a prefix no other test of this process uses.
func newPrefix() string { return fmt.Sprintf("t%d", prefixSeq.Add(1)) }

// testClient is a client of s as a Store uses one: bounded, with a timeout
// generous enough for a loaded machine under -race.
func testClient(t testing.TB, s *redistest.Server) *redis.Client {
	return s.Client(BoundedOptions(nil, 5*time.Second))
}

// replicasOn returns n Stores of one fresh deployment on s, each with its
// own client and Replica, closed when the test ends.
func replicasOn(t testing.TB, s *redistest.Server, n int, o Options) []*Store {
	if o.Prefix == "" {
		o.Prefix = newPrefix()
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	var out []*Store
	for i := range n {
		o := o
		o.Replica = fmt.Sprintf("replica-%d", i)
		st := New(testClient(t, s), o)
		t.Cleanup(func() { _ = st.Close() })
		out = append(out, st)
	}
	return out
}

// The ledger conformance suite of the library, against a real redis-server:
// every verdict, lookup, park list and fleet status equals the in-memory
// reference's, boundaries included, with explicit times (client-time
// mode), for one replica and for three.
func TestConformance(t *testing.T) {
	ledgertest.Conform(t, ledgersOn(redistest.Start(t)))
}

// ledgersOn returns the NewFunc of ledgertest for Stores on s, in
// client-time mode (the suite's times are explicit).
func ledgersOn(s *redistest.Server) ledgertest.NewFunc {
	return func(t *testing.T, n int) []share.Ledger {
		var out []share.Ledger
		for _, st := range replicasOn(t, s, n, Options{ClientTime: true}) {
			out = append(out, members{st})
		}
		return out
	}
}

// members is a Store that writes each change of its members at once: the
// suite's next step may be another replica's, which counts them, where a
// Store writes them within a round trip (TestFailingFractionCountsKeysOnce
// waits for that).
type members struct{ *Store }

func (m members) Member(key string, member bool) {
	m.Store.Member(key, member)
	if err := m.writeMembers(context.Background(), false); err != nil {
		panic(err)
	}
}

// The suite holds on Redis Cluster too: every step's keys share the hash
// tag, so the node runs them (it refuses a script whose keys span slots
// with CROSSSLOT).
func TestConformanceOnCluster(t *testing.T) {
	ledgertest.Conform(t, ledgersOn(redistest.Start(t, redistest.WithCluster())))
}

// The suite at the server's time, the default mode: every step reads the
// server's clock, which the test sets to the time of each call (see
// clockScript). The time rule is the same as in client-time mode (one
// latest time for the deployment, whichever clock gives it), and so must
// every answer be, times that run backwards (a server clock stepped back)
// included.
func TestConformanceServerTime(t *testing.T) {
	s := redistest.Start(t)
	src := clockScript(t, storeSource)
	ledgertest.Conform(t, func(t *testing.T, n int) []share.Ledger {
		rdb := testClient(t, s)
		var out []share.Ledger
		for _, st := range replicasOn(t, s, n, Options{}) {
			st.script = newProgram(src)
			out = append(out, &serverClock{Store: st, rdb: rdb})
		}
		return out
	})
}

// clockScript returns src with the server's clock, TIME, replaced by a
// clock the test sets: the deployment's key {p}:clock, 16 digits of
// microseconds (see serverClock), read as TIME's seconds and microseconds.
// Nothing else of the script changes.
func clockScript(t testing.TB, src string) string {
	const call = "redis.call('TIME')"
	require.Equal(t, 1, strings.Count(src, call), "store.lua reads the server's clock in one place")
	return strings.Replace(src, call, `(function()
    local c = redis.call('GET', tag .. 'clock')
    return {string.sub(c, 1, 10), tostring(tonumber(string.sub(c, 11)))}
  end)()`, 1)
}

// serverClock is a Store at the server's time whose script reads the clock
// of clockScript: it sets that clock to the time of each call that reads
// one (Judge, Proceed, Fleet) before the call.
type serverClock struct {
	*Store
	rdb *redis.Client
}

func (c *serverClock) Member(key string, member bool) { members{c.Store}.Member(key, member) }

func (c *serverClock) set(ctx context.Context, now time.Time) error {
	return c.rdb.Set(ctx, c.keys.tag+"clock", micros16(now.UnixMicro()), 0).Err()
}

func (c *serverClock) Judge(ctx context.Context, j share.Judgment) (share.Verdict, error) {
	if err := c.set(ctx, j.Now); err != nil {
		return share.Verdict{}, err
	}
	return c.Store.Judge(ctx, j)
}

func (c *serverClock) Proceed(ctx context.Context, key string, now time.Time) (share.Verdict, error) {
	if err := c.set(ctx, now); err != nil {
		return share.Verdict{}, err
	}
	return c.Store.Proceed(ctx, key, now)
}

func (c *serverClock) Fleet(ctx context.Context, now time.Time) (crashloop.FleetStatus, error) {
	if err := c.set(ctx, now); err != nil {
		return crashloop.FleetStatus{}, err
	}
	return c.Store.Fleet(ctx, now)
}

// By default the time of a step is the server's: the Judgment's time is
// not sent, the verdict and the park carry the server's clock, and a
// window counts by it.
func TestServerTime(t *testing.T) {
	s := redistest.Start(t)
	st := replicasOn(t, s, 1, Options{})[0]
	cfg := ledgertest.Config()
	require.NoError(t, st.Open(cfg, nil))
	ctx := context.Background()
	long := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) // far from the server's clock
	before := time.Now()
	var v share.Verdict
	for i := range cfg.Budget.MaxRespawns + 1 {
		var err error
		v, err = st.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingFailedStart, Incarnation: "k#1",
			Cause: "boom", Now: long.Add(time.Duration(i) * time.Hour), Members: 1, Failing: 1})
		require.NoError(t, err)
	}
	after := time.Now()
	// The Judgments were hours apart: by their times the window would have
	// emptied each time. By the server's, they came within milliseconds.
	require.True(t, v.NewPark, "the budget counted at the server's time: %+v", v)
	require.Equal(t, cfg.Budget.MaxRespawns, v.Park.Attempts)
	for _, tm := range []time.Time{v.Now, v.Park.Since} {
		require.False(t, tm.Before(before.Truncate(time.Microsecond)), "%v before %v", tm, before)
		require.False(t, tm.After(after), "%v after %v", tm, after)
	}
	ch, err := st.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, v.Park.Since, ch.Park.Since)

	st2 := replicasOn(t, s, 1, Options{})[0]
	require.NoError(t, st2.Open(cfg, nil))
	f, err := st2.Fleet(ctx, long)
	require.NoError(t, err)
	require.Equal(t, crashloop.FleetStatus{FleetRestartsPerHour: cfg.Fleet.RestartsPerHour}, f)
}
