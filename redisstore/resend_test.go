package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// A cluster client made by Connect sends a judge step once: when the
// server ran the step but its reply was lost (the connection broke after
// the request, or the reply came later than the client's timeout), the
// step fails as an outage and is not sent again, so the server counted the
// failure once. go-redis's cluster client resends a command after such an
// error (up to MaxRedirects times), which would count it again.
func TestClusterSendsAStepOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lose  func(p *redistest.SlowProxy)
		cause func(t *testing.T, p *redistest.SlowProxy, err error, lost *LostReplyError)
	}{
		{"connection broken after the step ran", func(p *redistest.SlowProxy) { p.LoseReply("FCALL") },
			func(t *testing.T, p *redistest.SlowProxy, err error, lost *LostReplyError) {
				require.Equal(t, 1, p.Lost())
				require.ErrorIs(t, lost.Err, io.EOF)
				require.NotErrorIs(t, err, io.EOF, "go-redis would send it again")
			}},
		{"reply later than the client's timeout", func(p *redistest.SlowProxy) { p.SetDelay(time.Hour) },
			func(t *testing.T, p *redistest.SlowProxy, err error, lost *LostReplyError) {
				require.True(t, timedOut(lost.Err), "%v", lost.Err)
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				var ne net.Error
				require.False(t, errors.As(err, &ne), "go-redis would send it again")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := redistest.Start(t, redistest.WithTCP(), redistest.WithCluster())
			p := redistest.NewTCPProxy(t, node)
			node.Announce(p.Addr()) // the client reaches the node of every slot through p
			ctx := context.Background()
			c, err := Connect(ctx, node.URL(), ClientOptions{Timeout: 300 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			require.IsType(t, &redis.ClusterClient{}, c)
			// The Store waits longer than the client: a timed-out read
			// leaves time for go-redis to send the step again.
			st := New(c, Options{Prefix: newPrefix(), Timeout: 5 * time.Second, ClientTime: true})
			t.Cleanup(func() { _ = st.Close() })
			require.NoError(t, st.Open(crashloop.DefaultSupervisorConfig(), nil))
			judge := func(i int) (share.Verdict, error) {
				return st.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingFailedStart, Now: start.Add(time.Duration(i) * time.Second)})
			}
			v, err := judge(1) // learns the epoch, loads the library: a step is one FCALL from now on
			require.NoError(t, err)
			require.Equal(t, 1, v.Attempt)

			admin := node.Client(nil)
			require.NoError(t, admin.ConfigResetStat(ctx).Err())
			tc.lose(p)
			_, err = judge(2)
			require.Equal(t, 1, calls(t, admin)["fcall"], "the step was sent once")
			var lost *LostReplyError
			require.ErrorAs(t, err, &lost, "the step ran, but its reply was lost: not sent again")
			require.Equal(t, p.Addr(), lost.Addr)
			tc.cause(t, p, err, lost)
			require.NotErrorIs(t, err, share.ErrMisconfigured, "an outage")

			p.SetDelay(0)
			v, err = judge(3)
			require.NoError(t, err)
			require.Equal(t, 3, v.Attempt, "the server counted the step whose reply was lost once")
		})
	}
}

// The hook passes on what go-redis may send again safely (a reply of the
// server, a failed dial, a pool timeout, a closed client, the context's
// end) and makes a *LostReplyError of the rest, once.
func TestLostReply(t *testing.T) {
	h := sendOnce{addr: "127.0.0.1:7000"}
	s := redistest.Start(t)
	c := testClient(t, s)
	refused := c.Eval(context.Background(), "return redis.error_reply('TRYAGAIN Multiple keys request during rehashing of slot')", nil).Err()
	require.Error(t, refused)
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, err := range []error{nil, refused, redis.Nil, dial, fmt.Errorf("wrapped: %w", dial), redis.ErrPoolTimeout, redis.ErrClosed,
		context.Canceled, context.DeadlineExceeded} {
		require.Equal(t, err, h.lost(err))
	}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, err := range []error{io.EOF, io.ErrUnexpectedEOF, reset, timeout, fmt.Errorf("wrapped: %w", io.EOF)} {
		lost := h.lost(err)
		require.Equal(t, &LostReplyError{Addr: h.addr, Err: err}, lost)
		require.Equal(t, lost, h.lost(lost), "once")
		require.Equal(t, "redisstore: lost the reply of 127.0.0.1:7000 (the command may have run; it was not sent again): "+err.Error(), lost.Error())
		require.NotErrorIs(t, lost, io.EOF)
		require.NotErrorIs(t, lost, io.ErrUnexpectedEOF)
		var ne net.Error
		require.False(t, errors.As(lost, &ne))
	}
	require.ErrorIs(t, h.lost(reset), syscall.ECONNRESET)
	require.ErrorIs(t, h.lost(timeout), os.ErrDeadlineExceeded)
}

// BoundedClusterOptions bounds every node client as BoundedOptions bounds
// a client, keeps the rest, and adds its hook to the node clients that the
// caller's NewClient makes.
func TestBoundedClusterOptionsSettings(t *testing.T) {
	made := 0
	in := &redis.ClusterOptions{Addrs: []string{"h:1"}, Password: "p", PoolSize: 7, DialerRetries: 9, MaxRetries: 5, MaxRedirects: 2,
		NewClient: func(o *redis.Options) *redis.Client { made++; return redis.NewClient(o) }}
	o := BoundedClusterOptions(in, budget)
	require.Equal(t, []string{"h:1"}, o.Addrs)
	require.Equal(t, "p", o.Password)
	require.Equal(t, 7, o.PoolSize)
	require.Equal(t, 2, o.MaxRedirects, "MOVED and ASK are followed")
	b := BoundedOptions(nil, budget) // TestBoundedOptionsSettings checks its values
	require.Equal(t, []any{b.DialTimeout, b.ReadTimeout, b.WriteTimeout, b.PoolTimeout, b.DialerRetries, b.MaxRetries, b.ContextTimeoutEnabled},
		[]any{o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.DialerRetries, o.MaxRetries, o.ContextTimeoutEnabled})
	require.Equal(t, 9, in.DialerRetries, "the input is not changed")
	require.Equal(t, DefaultTimeout, BoundedClusterOptions(nil, 0).DialTimeout)

	s := redistest.Start(t)
	p := redistest.NewTCPProxy(t, s)
	nc := o.NewClient(p.Options(BoundedOptions(nil, budget))) // as the cluster client makes a node client
	t.Cleanup(func() { _ = nc.Close() })
	require.Equal(t, 1, made)
	ctx := context.Background()
	p.LoseReply("SET")
	err := nc.Set(ctx, "k", "v", 0).Err()
	require.Equal(t, &LostReplyError{Addr: p.Addr(), Err: io.EOF}, err)
	require.Equal(t, "v", s.Client(nil).Get(ctx, "k").Val(), "the SET ran")
}
