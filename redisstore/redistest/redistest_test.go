package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// These tests prove the harness itself with raw sockets, so that what they
// show is the server's and the network's behaviour, not a client's: each
// failure the harness makes is the failure it claims to be. The go-redis
// settings that bound each wait are tested in package redisstore.

// roundTrip sends PING on c with a deadline of timeout and returns the reply
// line.
func roundTrip(c net.Conn, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestStartUnixNoPersistence(t *testing.T) {
	s := Start(t)
	require.Equal(t, "unix", s.Network())
	require.Equal(t, "unix://"+s.Addr(), s.URL())
	c := s.Client(nil)
	ctx := context.Background()
	cfg, err := c.ConfigGet(ctx, "*").Result()
	require.NoError(t, err)
	require.Equal(t, "", cfg["save"])
	require.Equal(t, "no", cfg["appendonly"])
	require.Equal(t, s.Addr(), cfg["unixsocket"])
	require.Equal(t, "0", cfg["port"])

	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	s.Restart()
	require.ErrorIs(t, c.Get(ctx, "k").Err(), redis.Nil, "a server without persistence restarts empty")
}

func TestStartTCP(t *testing.T) {
	s := Start(t, WithTCP())
	require.Equal(t, "tcp", s.Network())
	host, _, err := net.SplitHostPort(s.Addr())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	require.Equal(t, "redis://"+s.Addr(), s.URL())
	opt, err := redis.ParseURL(s.URL())
	require.NoError(t, err)
	c := redis.NewClient(opt)
	defer c.Close()
	require.Equal(t, "PONG", c.Ping(context.Background()).Val())
	addr := s.Addr()
	s.Restart()
	require.Equal(t, addr, s.Addr())
	require.Equal(t, "PONG", c.Ping(context.Background()).Val())
}

func TestAOFKeepsAcknowledgedWritesAcrossKill(t *testing.T) {
	dir := t.TempDir()
	s := Start(t, WithAOF(dir))
	c := s.Client(nil)
	ctx := context.Background()
	cfg, err := c.ConfigGet(ctx, "*").Result()
	require.NoError(t, err)
	require.Equal(t, "yes", cfg["appendonly"])
	require.Equal(t, "always", cfg["appendfsync"])
	require.Equal(t, dir, cfg["dir"])

	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	s.Kill() // SIGKILL: no shutdown, no final save
	s.Restart()
	require.Equal(t, "v", c.Get(ctx, "k").Val())
	entries, err := os.ReadDir(filepath.Join(dir, "appendonlydir"))
	require.NoError(t, err)
	require.NotEmpty(t, entries)
}

func TestKilledServerRefusesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{{"unix", nil}, {"tcp", []Option{WithTCP()}}} {
		t.Run(tc.name, func(t *testing.T) {
			s := Start(t, tc.opts...)
			s.Kill()
			s.Kill() // a second Kill does nothing
			// No deadline to run into: a refusal is an answer, not a wait.
			_, err := net.Dial(s.Network(), s.Addr())
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
		})
	}
}

func TestMissingServerFailsWithInstructions(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		Start(ft)
	}()
	require.Contains(t, ft.msg, "redis-server is not installed")
	require.Contains(t, ft.msg, "./test.sh")
}

// fatalRecorder records the message of Fatalf and stops the call there.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func (f *fatalRecorder) Helper() {}

func TestSlowProxyDelaysReplies(t *testing.T) {
	s := Start(t)
	p := NewSlowProxy(t, s, time.Hour)
	c, err := net.Dial("unix", p.Options(nil).Addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = roundTrip(c, 50*time.Millisecond)
	require.True(t, isTimeout(err), "a reply held back for an hour runs into the deadline: %v", err)

	p.SetDelay(0)
	c2, err := net.Dial("unix", p.Options(nil).Addr)
	require.NoError(t, err)
	defer c2.Close()
	line, err := roundTrip(c2, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", line)

	rc := p.Client(nil)
	require.Equal(t, "PONG", rc.Ping(context.Background()).Val())
}

// A lost reply: the command ran on the server, and its client's
// connection ends instead of bringing the reply; the next command, on a
// new connection, passes.
func TestTCPProxyLosesAReply(t *testing.T) {
	s := Start(t)
	p := NewTCPProxy(t, s)
	require.Equal(t, "tcp", p.Options(nil).Network)
	ctx := context.Background()
	rc := p.Client(&redis.Options{MaxRetries: -1})
	require.NoError(t, rc.Ping(ctx).Err(), "PING passes")
	p.LoseReply("set")
	require.ErrorIs(t, rc.Set(ctx, "k", "v", 0).Err(), io.EOF)
	require.Equal(t, 1, p.Lost())
	require.Equal(t, "v", s.Client(nil).Get(ctx, "k").Val(), "the SET ran")
	require.NoError(t, rc.Set(ctx, "k", "w", 0).Err(), "one reply lost")
	require.Equal(t, "w", rc.Get(ctx, "k").Val())
	require.Equal(t, 1, p.Lost())
}

func TestBlackHole(t *testing.T) {
	s := Start(t, InNetns())
	ns := s.Netns()
	require.NotNil(t, ns)
	require.Equal(t, "redis://"+ServerIP+":6379", s.URL())

	ctx := context.Background()
	c, err := ns.DialContext(ctx, "tcp", s.Addr())
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, ClientIP, c.LocalAddr().(*net.TCPAddr).IP.String())
	line, err := roundTrip(c, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", line)

	// Nothing sent from either namespace can leave them: the link is their
	// only route.
	for _, name := range []string{ns.Client, ns.Server} {
		out, err := exec.Command("ip", "-n", name, "-4", "route", "show").CombinedOutput()
		require.NoError(t, err, "%s", out)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Len(t, lines, 1, "%s", out)
		require.True(t, strings.HasPrefix(lines[0], "10.213.0.0/30 dev crl"), "%s", out)
	}

	s.BlackHole()
	// An open connection: the request vanishes, no reset comes back.
	_, err = roundTrip(c, 100*time.Millisecond)
	require.True(t, isTimeout(err), "read on a black-holed connection: %v", err)
	// A new connection: the SYN vanishes, no refusal comes back.
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = ns.DialContext(dctx, "tcp", s.Addr())
	require.Error(t, err)
	require.True(t, isTimeout(err) || errors.Is(err, context.DeadlineExceeded), "dial into a black hole: %v", err)
	require.NotErrorIs(t, err, syscall.ECONNREFUSED)

	s.Heal()
	c3, err := ns.DialContext(ctx, "tcp", s.Addr())
	require.NoError(t, err)
	defer c3.Close()
	line, err = roundTrip(c3, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", line)

	rc := s.Client(nil)
	require.Equal(t, "PONG", rc.Ping(ctx).Val())
}

func TestClusterEnforcesSlots(t *testing.T) {
	s := Start(t, WithCluster())
	c := s.Client(nil)
	ctx := context.Background()
	require.NoError(t, c.MSet(ctx, "{a}:1", "x", "{a}:2", "y").Err())
	err := c.MSet(ctx, "a1", "x", "b2", "y").Err()
	require.ErrorContains(t, err, "CROSSSLOT")
}

// likelyPorts are the TCP ports a redis-server takes unless told otherwise:
// 6379, 16379 for the cluster bus of a server on 6379, and 10000 for the
// cluster bus of a server on port 0 (a unix socket server).
var likelyPorts = []int{6379, 10000, 16379}

// hold listens on port on every address until the test ends, so that no
// server can listen on it. A port that another process holds already is
// just as unavailable, and is left to it.
func hold(t *testing.T, port int) {
	t.Helper()
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if errors.Is(err, syscall.EADDRINUSE) {
		t.Logf("port %d is held by another process already", port)
		return
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
}

// listensOnLoopbackOnly checks that a server listens on port at 127.0.0.1
// and at no other address: 127.0.0.1:port is taken, and 127.0.0.2:port,
// another loopback address that a bind to every address would cover too,
// is free.
func listensOnLoopbackOnly(t *testing.T, port int) {
	t.Helper()
	p := strconv.Itoa(port)
	_, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", p))
	require.ErrorIs(t, err, syscall.EADDRINUSE, "the server listens on 127.0.0.1:%d", port)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", p))
	require.NoError(t, err, "the server listens on 127.0.0.1:%d alone, not on every address", port)
	require.NoError(t, l.Close())
}

// Servers started at once, while the ports Redis takes by default are
// held, all start: each listens on ports of its own that the kernel found
// free, the cluster bus included, and on 127.0.0.1 alone. Two test
// binaries starting servers in parallel therefore never collide.
func TestPortsAreFreeAndOnLoopbackOnly(t *testing.T) {
	for _, p := range likelyPorts {
		hold(t, p)
	}
	t.Run("servers", func(t *testing.T) {
		for i := range 2 {
			for _, tc := range []struct {
				name    string
				opts    []Option
				tcp     bool
				cluster bool
			}{
				{"tcp", []Option{WithTCP()}, true, false},
				{"cluster", []Option{WithCluster()}, false, true},
				{"cluster on tcp", []Option{WithCluster(), WithTCP()}, true, true},
			} {
				t.Run(fmt.Sprintf("%s/%d", tc.name, i), func(t *testing.T) {
					t.Parallel()
					s := Start(t, tc.opts...)
					cfg, err := s.Client(nil).ConfigGet(context.Background(), "*").Result()
					require.NoError(t, err)
					require.Equal(t, "127.0.0.1", cfg["bind"])
					var ports []int
					if tc.tcp {
						_, p, err := net.SplitHostPort(s.Addr())
						require.NoError(t, err)
						require.Equal(t, p, cfg["port"])
						port, err := strconv.Atoi(p)
						require.NoError(t, err)
						ports = append(ports, port)
					} else {
						require.Equal(t, "0", cfg["port"])
					}
					if tc.cluster {
						require.Equal(t, "yes", cfg["cluster-enabled"])
						require.Equal(t, strconv.Itoa(s.bus), cfg["cluster-port"])
						ports = append(ports, s.bus)
					}
					for _, p := range ports {
						require.NotContains(t, likelyPorts, p)
						listensOnLoopbackOnly(t, p)
					}
				})
			}
		}
	})
}

// A server that cannot listen on its client port or its cluster bus,
// because another process holds it, is reported as such: Start then tries
// new ports.
func TestLaunchReportsATakenPort(t *testing.T) {
	s := Start(t, WithCluster(), WithTCP())
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	freePort := free.Addr().(*net.TCPAddr).Port
	require.NoError(t, free.Close())
	for _, tc := range []struct {
		name string
		addr string
		bus  int
	}{
		{"client port", s.addr, freePort},
		{"cluster bus", net.JoinHostPort(loopback, strconv.Itoa(freePort)), s.bus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			twin := &Server{t: t, cfg: s.cfg, dir: t.TempDir(), addr: tc.addr, bus: tc.bus}
			t.Cleanup(twin.stop)
			err := twin.launch(serverBinary(t))
			require.ErrorIs(t, err, errPortTaken)
			require.ErrorContains(t, err, "Address already in use")
		})
	}
	require.Equal(t, "PONG", s.Client(nil).Ping(context.Background()).Val(), "the server that holds them runs on")
}

// A cluster of three masters with a replica each answers through a cluster
// client, and a killed master's replica takes its slots.
func TestStartClusterFailsOver(t *testing.T) {
	cl := StartCluster(t, 3, 1)
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cl.Masters[0].Addr()}, ClusterStateReloadInterval: 100 * time.Millisecond,
		DialerRetries: 1, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	require.NoError(t, c.Set(ctx, "{x}", "1", 0).Err())
	owner := cl.Owner(t, "{x}")
	replica := cl.Replicas[cl.Index(owner)][0]
	oc := redis.NewClient(owner.Options(nil))
	require.Equal(t, int64(1), oc.Wait(ctx, 1, 5*time.Second).Val(), "the replica has the write")
	_ = oc.Close()
	owner.Kill()
	require.Eventually(t, func() bool {
		rc := redis.NewClient(replica.Options(nil))
		defer rc.Close()
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master")
	}, 10*time.Second, 10*time.Millisecond, "the replica is promoted")
	require.Eventually(t, func() bool {
		return c.Get(ctx, "{x}").Val() == "1"
	}, 10*time.Second, 10*time.Millisecond)
}

// A sentinel promotes the replica when the master dies, and a failover
// client follows it.
func TestStartSentinelFailsOver(t *testing.T) {
	s := StartSentinel(t)
	ctx := context.Background()
	fo, err := redis.ParseFailoverURL(s.URL())
	require.NoError(t, err)
	c := redis.NewFailoverClient(fo)
	defer c.Close()
	require.NoError(t, c.Set(ctx, "x", "1", 0).Err())
	mc := redis.NewClient(s.Master.Options(nil))
	require.Equal(t, int64(1), mc.Wait(ctx, 1, 5*time.Second).Val())
	_ = mc.Close()
	s.Master.Kill()
	require.Eventually(t, func() bool { return c.Get(ctx, "x").Val() == "1" && c.Set(ctx, "y", "1", 0).Err() == nil },
		20*time.Second, 10*time.Millisecond, "the promoted replica takes writes")
}
