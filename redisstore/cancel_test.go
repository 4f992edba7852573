package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// A caller's cancel ends a call stuck on a server that answers nothing (a
// redis-server stopped with SIGSTOP) at once, with the context's error:
// go-redis alone would wait for the read deadline.

// cancelBound is how soon after its cancel a stuck call must return.
const cancelBound = time.Millisecond

// wire watches the connections of a client for the one command a test
// leaves stuck on a paused server: sent reports that a command holding
// match was written after arm, and answered that a reply then came on that
// connection.
type wire struct {
	mu       sync.Mutex
	armed    bool
	match    []byte
	stuck    net.Conn
	sent     chan struct{}
	answered chan struct{}
}

// arm watches for the next command whose text holds match, in lower case
// ("": any command, such as the handshake of a new connection).
func (w *wire) arm(match string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.match, w.stuck = true, []byte(match), nil
	w.sent, w.answered = make(chan struct{}), make(chan struct{})
}

// channels returns the channels of the current arm.
func (w *wire) channels() (sent, answered chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent, w.answered
}

// dialer returns o with a Dialer whose connections w watches.
func (w *wire) dialer(o *redis.Options) *redis.Options {
	var d net.Dialer
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &watchedConn{Conn: c, w: w}, nil
	}
	return o
}

type watchedConn struct {
	net.Conn
	w *wire
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	w := c.w
	w.mu.Lock()
	if w.armed && n > 0 && bytes.Contains(bytes.ToLower(p[:n]), w.match) {
		w.armed, w.stuck = false, c
		close(w.sent)
	}
	w.mu.Unlock()
	return n, err
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	w := c.w
	w.mu.Lock()
	if w.stuck == c && n > 0 {
		w.stuck = nil
		close(w.answered)
	}
	w.mu.Unlock()
	return n, err
}

// stuckCall runs call with a context it cancels once a command of the
// call holding match is on the wire to a paused server and the call still
// waits. It returns how long after the cancel the call returned and the
// call's error; answered is closed when the server, resumed, has replied
// to the command the call left behind.
func stuckCall(t *testing.T, w *wire, match string, call func(ctx context.Context) error) (took time.Duration, answered chan struct{}, err error) {
	t.Helper()
	w.arm(match)
	sent, answered := w.channels()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		err := call(ctx)
		done <- result{err, time.Now()}
	}()
	select {
	case <-sent:
	case r := <-done:
		t.Fatalf("the call returned before it was stuck: %v", r.err)
	case <-time.After(watchdog):
		t.Fatal("the call's command never reached the server")
	}
	select {
	case r := <-done:
		t.Fatalf("a call to a paused server returned before its cancel: %v", r.err)
	default:
	}
	cancelled := time.Now()
	cancel()
	select {
	case r := <-done:
		return r.at.Sub(cancelled), answered, r.err
	case <-time.After(watchdog):
		t.Fatal("the cancelled call did not return")
	}
	return 0, nil, nil
}

// unheard is a Store whose Supervisor hears no notices: no listener runs
// the script (its reconcile) while a test waits for the one command it
// leaves stuck, or holds the connection that command would take.
type unheard struct{ *Store }

func (u unheard) Open(cfg crashloop.SupervisorConfig, _ func(share.Change)) error {
	return u.Store.Open(cfg, nil)
}

// cancelAttempts is how many times a test may measure how soon a stuck
// call returns after its cancel. On a loaded machine (and under -race) the
// goroutine that returns can wait milliseconds for a CPU, a scheduling
// outlier that is not the call's: so each attempt asserts everything else,
// and the bound holds for the fastest attempt. A call that waits for its
// read deadline (a minute here) fails every attempt.
const cancelAttempts = 3

// withinBound runs attempt, which returns how long after its cancel a
// stuck call returned, until one is within cancelBound, at most
// cancelAttempts times, and fails t unless one was.
func withinBound(t *testing.T, what string, attempt func(i int) time.Duration) {
	t.Helper()
	var took []time.Duration
	for i := range cancelAttempts {
		d := attempt(i)
		took = append(took, d)
		if d < cancelBound {
			t.Logf("%s returned %v after its cancel (attempts: %v)", what, d, took)
			return
		}
	}
	t.Fatalf("%s: no attempt returned within %v of its cancel: %v", what, cancelBound, took)
}

// A shared decision stuck on a paused server ends within a millisecond of
// its caller's cancel, with the context's error; it commits nothing and
// announces nothing, and the store is not taken for failed: the next
// decision asks it. The server, resumed, runs the judgment it was sent all
// the same (the gap docs/redis.md states): the next decision counts it.
func TestCancelEndsADecisionStuckOnAPausedServer(t *testing.T) {
	s := redistest.Start(t)
	w := &wire{}
	// Only the cancel can end a stuck call: every bound is a minute.
	c := redis.NewClient(w.dialer(s.Options(BoundedOptions(nil, time.Minute))))
	t.Cleanup(func() { _ = c.Close() })
	st := New(c, Options{Prefix: newPrefix(), Timeout: time.Minute, ClientTime: true})
	t.Cleanup(func() { _ = st.Close() })
	r := &replica{store: st, evs: &events{}, clock: clock.NewMock()}
	r.clock.Set(start)
	sup, err := newShared(crashloop.DefaultSupervisorConfig(), unheard{st},
		crashloop.WithEventHandler(r.evs), crashloop.WithClock(r.clock))
	require.NoError(t, err)
	r.sup = sup
	boom := crashloop.RunResult{Err: errors.New("boom")}
	live := context.Background()
	withinBound(t, "a stuck decision", func(i int) time.Duration {
		key := fmt.Sprintf("k%d", i)
		require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: 500 * time.Millisecond}, r.sup.Decide(live, key, boom))
		require.Equal(t, 1, r.sup.Status(live).Keys[key].TotalRestarts)
		announced := len(r.evs.of(crashloop.EventRespawnScheduled))
		before, err := r.sup.Snapshot() // what this replica keeps; it asks the store nothing
		require.NoError(t, err)

		s.Pause()
		var d crashloop.Decision
		took, answered, _ := stuckCall(t, w, "judge", func(ctx context.Context) error {
			d = r.sup.Decide(ctx, key, boom)
			return d.Err
		})
		require.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: context.Canceled}, d)
		after, err := r.sup.Snapshot()
		require.NoError(t, err)
		require.JSONEq(t, string(before), string(after), "nothing committed")
		require.Len(t, r.evs.of(crashloop.EventRespawnScheduled), announced, "nothing announced")
		require.Empty(t, r.evs.of(crashloop.EventStoreUnavailable), "a cancel is no outage")

		s.Continue()
		select {
		case <-answered:
		case <-time.After(watchdog):
			t.Fatal("the resumed server never answered the command left behind")
		}
		// The server counted the cancelled judgment: this failure is the
		// third of the window (1.5s), not the second (1s); and it was the
		// store's count, not one decided alone.
		require.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: 1500 * time.Millisecond}, r.sup.Decide(live, key, boom))
		require.Equal(t, 3, r.sup.Status(live).Keys[key].TotalRestarts)
		require.Empty(t, r.evs.of(crashloop.EventStoreUnavailable))
		return took
	})
}

// Every call of a Store stuck on a paused server ends within a millisecond
// of its cancel, with the context's error, and so does a call whose
// deadline passes.
func TestCancelEndsStoreCallsStuckOnAPausedServer(t *testing.T) {
	s := redistest.Start(t)
	w := &wire{}
	o := s.Options(BoundedOptions(nil, time.Minute))
	o.PoolSize = 64 // each command left behind holds a connection while the server is paused
	c := redis.NewClient(w.dialer(o))
	t.Cleanup(func() { _ = c.Close() })
	st := New(c, Options{Prefix: newPrefix(), Timeout: time.Minute, ClientTime: true})
	t.Cleanup(func() { _ = st.Close() })
	require.NoError(t, st.Open(crashloop.DefaultSupervisorConfig(), nil)) // no notices: nothing else writes
	ctx := context.Background()
	park(t, st, "p", start) // a park for Resume to clear
	s.Pause()
	// Before the Store closes: its Close withdraws its members, a call
	// that a paused server would hold for the whole minute of its timeout.
	t.Cleanup(s.Continue)
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Judge", func(ctx context.Context) error {
			_, err := st.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingFailedStart, Incarnation: "k#1", Now: start})
			return err
		}},
		{"Proceed", func(ctx context.Context) error { _, err := st.Proceed(ctx, "k", start); return err }},
		{"Lookup", func(ctx context.Context) error { _, err := st.Lookup(ctx, "k"); return err }},
		{"Resume", func(ctx context.Context) error { _, _, err := st.Resume(ctx, "p", 1, start); return err }},
		{"Forget", func(ctx context.Context) error { _, err := st.Forget(ctx, "k", 0); return err }},
		{"Restore", func(ctx context.Context) error { _, err := st.Restore(ctx, nil); return err }},
		{"Parked", func(ctx context.Context) error { _, err := st.Parked(ctx); return err }},
		{"Fleet", func(ctx context.Context) error { _, err := st.Fleet(ctx, start); return err }},
	} {
		// The first call sends its script on the connection the park
		// left in the pool; the others, with that one taken by a command
		// left behind, wait on the handshake of a new connection.
		withinBound(t, tc.name, func(int) time.Duration {
			took, _, err := stuckCall(t, w, "", tc.call)
			require.ErrorIs(t, err, context.Canceled, tc.name)
			return took
		})
	}

	// A deadline ends a stuck call as a cancel does, with its own error.
	dctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	_, err := st.Lookup(dctx, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A done context sends nothing.
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	w.arm("")
	sent, _ := w.channels()
	_, err = st.Lookup(done, "k")
	require.ErrorIs(t, err, context.Canceled)
	select {
	case <-sent:
		t.Fatal("a call with a done context sent its command")
	default:
	}
}
