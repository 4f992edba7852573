package redisstore

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// budget is the timeout the bounded-wait tests give BoundedOptions. Each
// test asserts the kind of error and that the call ended within slack times
// the budget: generous enough for a loaded CI machine under -race, and far
// below what go-redis's defaults take (seconds).
const (
	budget = 200 * time.Millisecond
	slack  = 3
)

// dialCounter wraps the dialer of o (or a plain one) and counts its calls.
func dialCounter(o *redis.Options) (*redis.Options, *atomic.Int32) {
	var n atomic.Int32
	dial := o.Dialer
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return dial(ctx, network, addr)
	}
	return o, &n
}

// timedOut reports whether err is a timeout: a net.Error that says so, or
// a context deadline.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// timed runs f once and returns its error and how long it took.
func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// measure runs a failing call n times, checks each error with check and its
// time against the bound, and logs the times (NOTES.md records them).
func measure(t *testing.T, what string, n int, call func() error, check func(error) bool) {
	t.Helper()
	var times []time.Duration
	for range n {
		d, err := timed(call)
		require.Error(t, err, what)
		require.True(t, check(err), "%s: unexpected error %v", what, err)
		requireBounded(t, d, "%s took %v: %v", what, d, err)
		times = append(times, d)
	}
	slices.Sort(times)
	t.Logf("%s: %d calls, min %v, median %v, max %v", what, n, times[0], times[len(times)/2], times[len(times)-1])
}

func ping(c *redis.Client) func() error {
	return func() error { return c.Ping(context.Background()).Err() }
}

func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func TestBoundedOptionsSettings(t *testing.T) {
	in := &redis.Options{Addr: "h:1", Password: "p", DB: 3, PoolSize: 7, DialerRetries: 9, MaxRetries: 5}
	o := BoundedOptions(in, budget)
	require.Equal(t, "h:1", o.Addr)
	require.Equal(t, "p", o.Password)
	require.Equal(t, 3, o.DB)
	require.Equal(t, 7, o.PoolSize)
	require.Equal(t, budget, o.DialTimeout)
	require.Equal(t, budget, o.ReadTimeout)
	require.Equal(t, budget, o.WriteTimeout)
	require.Equal(t, budget, o.PoolTimeout)
	require.Equal(t, 1, o.DialerRetries)
	require.Equal(t, -1, o.MaxRetries)
	require.True(t, o.ContextTimeoutEnabled)
	require.Equal(t, 9, in.DialerRetries, "the input is not changed")
	require.Equal(t, DefaultTimeout, BoundedOptions(nil, 0).DialTimeout)
	require.Equal(t, DefaultTimeout, BoundedOptions(nil, -time.Second).ReadTimeout)
}

// A refused connection is an answer: the command fails at once, after one
// dial. go-redis's defaults take hundreds of milliseconds and 20 dials for
// the same refusal (the contrast below).
func TestBoundedRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []redistest.Option
	}{{"unix", nil}, {"tcp", []redistest.Option{redistest.WithTCP()}}} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t, tc.opts...)
			s.Kill()
			o, dials := dialCounter(s.Options(BoundedOptions(nil, budget)))
			c := redis.NewClient(o)
			defer c.Close()
			d, err := timed(ping(c))
			require.True(t, refused(err), "%v", err)
			require.Equal(t, int32(1), dials.Load(), "one dial, no retry")
			require.Less(t, d, budget, "a refusal does not wait for any timeout")
			measure(t, "refused "+tc.name, 10, ping(c), refused)
		})
	}
}

func TestDefaultOptionsRetryARefusal(t *testing.T) {
	s := redistest.Start(t)
	s.Kill()
	o, dials := dialCounter(s.Options(nil))
	c := redis.NewClient(o)
	defer c.Close()
	d, err := timed(ping(c))
	require.True(t, refused(err), "%v", err)
	// 4 attempts (MaxRetries 3), each dialing 5 times with 4 pauses of
	// 100ms: at least 1.6s of pauses alone.
	require.Equal(t, int32(20), dials.Load())
	require.GreaterOrEqual(t, d, 1600*time.Millisecond)
	t.Logf("refused with go-redis defaults: %v, %d dials", d, dials.Load())
}

// A black hole answers nothing: a new connection runs into the dial timeout
// and an open one into the read timeout, each once.
func TestBoundedBlackHole(t *testing.T) {
	s := redistest.Start(t, redistest.InNetns())
	o, dials := dialCounter(s.Options(BoundedOptions(nil, budget)))
	c := redis.NewClient(o)
	defer c.Close()
	require.NoError(t, c.Ping(context.Background()).Err()) // one pooled connection
	s.BlackHole()

	d, err := timed(ping(c)) // on the pooled connection
	require.True(t, timedOut(err), "%v", err)
	require.GreaterOrEqual(t, d, budget, "it waited for the read timeout")
	requireBounded(t, d)
	require.Equal(t, int32(1), dials.Load(), "the pooled connection was used, nothing dialed")
	t.Logf("black hole, open connection: %v", d)

	d, err = timed(ping(c)) // the timed-out connection was dropped: a new dial
	require.True(t, timedOut(err), "%v", err)
	require.GreaterOrEqual(t, d, budget, "it waited for the dial timeout")
	requireBounded(t, d)
	require.Equal(t, int32(2), dials.Load(), "one dial, no retry")
	require.NotErrorIs(t, err, syscall.ECONNREFUSED)

	measure(t, "black hole, new connection", 5, ping(c), timedOut)

	s.Heal()
	require.NoError(t, c.Ping(context.Background()).Err())
}

// A slow server answers too late: the read timeout ends the wait, on an
// open connection and on a new one (whose handshake is slow too).
func TestBoundedSlowServer(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewSlowProxy(t, s, 0)
	c := p.Client(BoundedOptions(nil, budget))
	require.NoError(t, c.Ping(context.Background()).Err())
	p.SetDelay(time.Hour)

	d, err := timed(ping(c))
	require.True(t, timedOut(err), "%v", err)
	require.GreaterOrEqual(t, d, budget)
	requireBounded(t, d)
	measure(t, "slow server", 5, ping(c), timedOut)

	// A reply just within the budget still arrives.
	p.SetDelay(budget / 4)
	require.NoError(t, c.Ping(context.Background()).Err())
}

// A server killed mid-run: the open connections see the connection closed
// at once, then the dials are refused; nothing waits for a timeout, and the
// client works again as soon as the server is back.
func TestBoundedServerKilled(t *testing.T) {
	s := redistest.Start(t, redistest.WithTCP())
	o, dials := dialCounter(s.Options(BoundedOptions(nil, budget)))
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	require.NoError(t, c.Ping(ctx).Err())

	// A command in flight when the server dies: BLPOP holds the connection
	// until the server answers, which it never does.
	inFlight := make(chan error, 1)
	blocked := redis.NewClient(s.Options(BoundedOptions(nil, 10*time.Second)))
	defer blocked.Close()
	require.NoError(t, blocked.Ping(ctx).Err())
	go func() { inFlight <- blocked.BLPop(ctx, 0, "never").Err() }()
	require.Eventually(t, func() bool { // the server sees it blocked
		info, err := c.Info(ctx, "clients").Result()
		return err == nil && strings.Contains(info, "blocked_clients:1\r\n")
	}, 5*time.Second, time.Millisecond)

	s.Kill()
	err := <-inFlight
	require.Error(t, err)
	require.False(t, timedOut(err), "the kill is seen as a closed connection, not a timeout: %v", err)

	n := dials.Load()
	d, err := timed(ping(c))
	require.Error(t, err)
	require.Less(t, d, budget, "no wait: %v", err)
	require.LessOrEqual(t, dials.Load()-n, int32(1), "at most one dial")
	measure(t, "killed server", 10, ping(c), refused)

	s.Restart()
	require.NoError(t, c.Ping(ctx).Err(), "the first command after the restart works")
}

// After as many failed dials as the pool has connections, go-redis stops
// dialing on the caller's path: every command fails at once with the last
// dial error while one goroutine probes the server once a second. A server
// that comes back is therefore seen up to about a second late.
func TestRecoveryAfterManyFailedDials(t *testing.T) {
	s := redistest.Start(t, redistest.WithTCP())
	o, dials := dialCounter(s.Options(BoundedOptions(&redis.Options{PoolSize: 4}, budget)))
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	s.Kill()
	for range 4 {
		require.True(t, refused(c.Ping(ctx).Err()))
	}
	// The fourth failure started the prober: it dials once at once, then
	// once a second.
	require.Eventually(t, func() bool { return dials.Load() == 5 }, 5*time.Second, time.Millisecond)
	d, err := timed(ping(c))
	require.True(t, refused(err), "the last dial error, without a dial: %v", err)
	require.Equal(t, int32(5), dials.Load())
	require.Less(t, d, budget)

	s.Restart()
	start := time.Now()
	require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 5*time.Second, 5*time.Millisecond)
	t.Logf("recovered %v after the server was back (probe every 1s)", time.Since(start))
}

// A decision runs under a context deadline as well: with
// ContextTimeoutEnabled it bounds the whole call, pool wait, dial,
// handshake and reply together.
func TestContextDeadlineBoundsTheCall(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewSlowProxy(t, s, time.Hour)
	c := p.Client(BoundedOptions(nil, time.Hour)) // only the context bounds it
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	d, err := timed(func() error { return c.Ping(ctx).Err() })
	require.True(t, timedOut(err), "%v", err)
	requireBounded(t, d)
}

func TestNewClientParsesURLs(t *testing.T) {
	for _, tc := range []struct {
		url, password             string
		network, addr, user, pass string
		db                        int
		tls                       bool
	}{
		{"redis://localhost:6380/2", "", "tcp", "localhost:6380", "", "", 2, false},
		{"redis://user:fromurl@h:1/0", "fromenv", "tcp", "h:1", "user", "fromurl", 0, false},
		{"redis://h:1", "fromenv", "tcp", "h:1", "", "fromenv", 0, false},
		{"rediss://h:1/3", "", "tcp", "h:1", "", "", 3, true},
		{"unix:///run/redis.sock?db=4", "fromenv", "unix", "/run/redis.sock", "", "fromenv", 4, false},
	} {
		c, err := NewClient(tc.url, tc.password, budget)
		require.NoError(t, err, tc.url)
		o := c.Options()
		require.Equal(t, []any{tc.network, tc.addr, tc.user, tc.pass, tc.db, tc.tls},
			[]any{o.Network, o.Addr, o.Username, o.Password, o.DB, o.TLSConfig != nil}, tc.url)
		require.Equal(t, BoundedOptions(&redis.Options{}, budget).ReadTimeout, o.ReadTimeout)
		require.Equal(t, 1, o.DialerRetries)
		require.Equal(t, 0, o.MaxRetries, "the client reads MaxRetries -1 as none, 0 after")
		require.True(t, o.ContextTimeoutEnabled)
		require.NoError(t, c.Close())
	}
}

// A password is never part of an error, whether it came in the URL or
// from the environment, and a URL that cannot be parsed is not shown.
func TestNewClientErrorsHideThePassword(t *testing.T) {
	for _, raw := range []string{
		"redis://user:s3cret@h:1/x/y",        // bad path
		"redis://user:s3cret@h:1/notanumber", // bad database
		"http://user:s3cret@h:1/0",           // bad scheme
		"redis://user:s3/cret@h:1/0",         // a password that breaks the URL's form
		"redis://user:s3cret@h:port/0",       // bad port
		"redis://h:1/0?dial_timeout=s3cret",  // the password where an option goes
		"unix://user:s3cret@?db=1",           // no socket path
	} {
		_, err := NewClient(raw, "s3cret", budget)
		require.Error(t, err, raw)
		require.NotContains(t, err.Error(), "s3cret", raw)
		require.NotContains(t, err.Error(), "s3/cret", raw)
		require.Contains(t, err.Error(), "redisstore: ", raw)
	}
}

// The password from the environment reaches the server; a wrong one is
// refused without being echoed.
func TestNewClientAuthenticates(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	require.NoError(t, s.Client(nil).ConfigSet(ctx, "requirepass", "s3cret").Err())
	c, err := NewClient(s.URL(), "s3cret", budget)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Ping(ctx).Err())

	wrong, err := NewClient(s.URL(), "wrong-pw", budget)
	require.NoError(t, err)
	defer wrong.Close()
	err = wrong.Ping(ctx).Err()
	require.ErrorContains(t, err, "WRONGPASS")
	require.NotContains(t, err.Error(), "wrong-pw")
}
