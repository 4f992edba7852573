// Package redistest runs a real redis-server for one test: on a unix socket
// in the test's temporary folder by default, on 127.0.0.1 or inside network
// namespaces made by the test on request, with or without AOF persistence.
// It also has a proxy that delays replies (SlowProxy) and, with InNetns, a
// link that can be cut so that packets vanish (Server.BlackHole).
//
// Outside a namespace a server listens on 127.0.0.1 only, and every TCP port
// it listens on (the client port of WithTCP, the cluster bus of
// WithCluster) is one the kernel found free: never a default such as 6379,
// 16379 or 10000 (the cluster bus of a server on port 0), so the servers of
// test binaries running in parallel never collide. A start that loses its
// ports to another process meanwhile is retried on new ones.
//
// A test that asks for a server when redis-server is not installed fails: it
// never skips. ./test.sh at the root of the repository installs it.
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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long Start and Restart wait for a new server to
// answer PING.
const startTimeout = 10 * time.Second

// startAttempts bounds how many times Start picks new free ports for a
// server that could not bind the ones it was given (another process took
// them between the pick and the bind).
const startAttempts = 10

// loopback is the address every server outside a namespace listens on.
const loopback = "127.0.0.1"

// errPortTaken is the error of a launch whose server could not listen on
// its ports because another process holds one of them.
var errPortTaken = errors.New("redistest: a port of the server is taken")

// Option configures Start. The zero set of options gives a server on a unix
// socket with no persistence.
type Option func(*config)

type config struct {
	aofDir  string // "" for no persistence
	tcp     bool
	netns   bool
	cluster bool
	tls     *TLSFiles
	member  bool   // a node of a cluster of several (StartCluster): no slots of its own at start
	replica string // host:port of the master this server replicates (WithReplicaOf, StartSentinel)
	nofunc  bool   // FCALL and FUNCTION renamed away (WithoutFunctions)
	watch   string // host:port of the master this server watches as a sentinel (StartSentinel)
}

// TLSFiles are the PEM files of a server WithTLS: its certificate and key,
// and the certificate authority whose clients it accepts. It is a plain
// value; every field is required.
type TLSFiles struct {
	Cert, Key, CA string
}

// WithTLS makes the server listen with TLS too, on 127.0.0.1 at a port the
// kernel found free (TLSAddr), with the certificate and key of f, asking
// every client for a certificate signed by f.CA (tls-auth-clients yes). The
// server keeps its plain socket or port, which Options and Client reach.
func WithTLS(f TLSFiles) Option { return func(c *config) { c.tls = &f } }

// WithAOF makes the server keep its data in an append-only file in dir,
// flushed to disk after every write (appendonly yes, appendfsync always),
// so that Restart finds every acknowledged write. The default is no
// persistence at all (save "" and appendonly no).
func WithAOF(dir string) Option { return func(c *config) { c.aofDir = dir } }

// WithTCP makes the server listen on 127.0.0.1 at a port the kernel found
// free instead of on a unix socket.
func WithTCP() Option { return func(c *config) { c.tcp = true } }

// WithReplicaOf makes the server a replica of master (a server on TCP,
// WithTCP), which it syncs with at once; give it WithTCP too. The test
// promotes it with REPLICAOF NO ONE.
func WithReplicaOf(master *Server) Option { return func(c *config) { c.replica = master.addr } }

// WithoutFunctions makes the server answer FCALL and FUNCTION as a server
// before Redis 7.0 does, as unknown commands (rename-command to "").
func WithoutFunctions() Option { return func(c *config) { c.nofunc = true } }

// WithCluster runs the server as a Redis Cluster of one node that owns every
// slot (cluster-enabled yes, CLUSTER ADDSLOTSRANGE 0 16383). Plain clients
// reach every key, and the server enforces the cluster's rules: a command or
// script whose keys hash to different slots fails with CROSSSLOT. Its
// cluster bus listens on 127.0.0.1 at a port the kernel found free, on a
// unix socket server too (InNetns: on the default port, 16379, in the
// test's own namespace).
func WithCluster() Option { return func(c *config) { c.cluster = true } }

// InNetns runs the server inside a network namespace made by the test,
// reachable only over a veth link from a second namespace of the test, the
// client's (see Netns). The server listens on TCP at ServerIP; Options and
// Client dial it from the client's namespace, and BlackHole cuts the link.
// The test must run as root, and fails otherwise.
func InNetns() Option { return func(c *config) { c.netns = true } }

// Server is a redis-server started by Start for one test and stopped when the
// test ends. Its methods are safe for concurrent use. The zero value is not
// usable: get one from Start.
type Server struct {
	t       testing.TB
	cfg     config
	dir     string
	sock    string // unix socket path; "" on TCP
	addr    string // host:port on TCP
	bus     int    // the cluster bus port; 0 unless WithCluster outside a namespace
	tlsPort int    // the TLS port; 0 unless WithTLS
	ns      *Netns // nil unless InNetns

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// Start runs a redis-server for t and waits until it answers PING. The
// server is killed and its files are removed when t ends. Without redis-server
// on PATH, Start fails t with a message saying to run ./test.sh.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin := serverBinary(t)
	s := &Server{t: t, dir: t.TempDir()}
	for _, o := range opts {
		o(&s.cfg)
	}
	if s.cfg.netns {
		// The namespace is the test's own: nothing else listens there, so
		// Redis's default ports are free.
		s.ns = NewNetns(t)
		s.addr = net.JoinHostPort(ServerIP, "6379")
	} else if !s.cfg.tcp {
		// A short name: a unix socket path must fit in 108 bytes.
		s.sock = filepath.Join(s.dir, "r.sock")
	}
	t.Cleanup(s.stop)
	for attempt := 1; ; attempt++ {
		if s.ns == nil {
			s.pickPorts()
		}
		err := s.launch(bin)
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			t.Fatal(err)
		}
		// Another process took a port between the pick and the bind: the
		// next attempt starts afresh on new ports.
		_ = os.Remove(filepath.Join(s.dir, "nodes.conf"))
	}
	if s.cfg.cluster && !s.cfg.member {
		s.ownAllSlots()
	}
	return s
}

// pickPorts gives a server outside a namespace the TCP ports it needs (the
// client port of WithTCP, the cluster bus of WithCluster): ports on
// 127.0.0.1 that the kernel chose among the free ones, held together while
// they are chosen so that they differ.
func (s *Server) pickPorts() {
	s.t.Helper()
	n := 0
	if s.cfg.tcp {
		n++
	}
	if s.cfg.cluster {
		n++
	}
	if s.cfg.tls != nil {
		n++
	}
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
		if err != nil {
			s.t.Fatalf("redistest: pick a free port: %v", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	if s.cfg.tcp {
		s.addr, ports = net.JoinHostPort(loopback, strconv.Itoa(ports[0])), ports[1:]
	}
	if s.cfg.cluster {
		s.bus, ports = ports[0], ports[1:]
	}
	if s.cfg.tls != nil {
		s.tlsPort = ports[0]
	}
}

// ownAllSlots gives a cluster node every slot and waits until the cluster
// is ok.
func (s *Server) ownAllSlots() {
	s.t.Helper()
	c := redis.NewClient(s.Options(nil))
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		s.t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE: %v", err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: cluster not ok within %v: %v %s", startTimeout, err, info)
		}
		time.Sleep(5 * time.Millisecond) // polling for readiness, not timing anything
	}
}

// serverBinary returns the path of redis-server, or fails t.
func serverBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server is not installed (%v): run ./test.sh at the root of the repository, which installs it (Debian package redis-server)", err)
	}
	return bin
}

// args returns the server's command line: the same on every launch, so a
// restarted server has the same socket or port, folder and persistence.
func (s *Server) args() []string {
	if s.cfg.watch != "" {
		return s.sentinelArgs()
	}
	a := []string{"--daemonize", "no", "--logfile", filepath.Join(s.dir, "redis.log"), "--save", ""}
	// A replica's first sync at once, not after the default 5s wait for
	// more replicas.
	a = append(a, "--repl-diskless-sync-delay", "0")
	if s.cfg.nofunc {
		a = append(a, "--rename-command", "FCALL", "", "--rename-command", "FUNCTION", "")
	}
	if s.cfg.replica != "" {
		host, port, _ := net.SplitHostPort(s.cfg.replica)
		a = append(a, "--replicaof", host, port)
	}
	if s.sock != "" {
		// --bind: the cluster bus listens on the bound addresses even when
		// the server has no TCP port (by default, on every interface).
		a = append(a, "--bind", loopback, "--port", "0", "--unixsocket", s.sock, "--unixsocketperm", "700")
	} else {
		host, port, _ := net.SplitHostPort(s.addr)
		a = append(a, "--bind", host, "--port", port, "--protected-mode", "no")
	}
	if s.cfg.cluster {
		a = append(a, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.dir, "nodes.conf"))
		if s.bus != 0 {
			// Never the default, port+10000: 10000 for a server on port 0.
			a = append(a, "--cluster-port", strconv.Itoa(s.bus))
		}
		if s.cfg.member {
			// A failover within a second of a master's death, not 15s.
			a = append(a, "--cluster-node-timeout", "500", "--cluster-replica-validity-factor", "0")
		}
	}
	if f := s.cfg.tls; f != nil {
		a = append(a, "--tls-port", strconv.Itoa(s.tlsPort), "--tls-cert-file", f.Cert, "--tls-key-file", f.Key,
			"--tls-ca-cert-file", f.CA, "--tls-auth-clients", "yes")
	}
	if s.cfg.aofDir != "" {
		a = append(a, "--dir", s.cfg.aofDir, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--dir", s.dir, "--appendonly", "no")
	}
	return a
}

// launch starts the server process and waits until it answers PING. It
// returns an error matching errPortTaken when the server exited because
// another process holds one of its ports.
func (s *Server) launch(bin string) error {
	name, args := bin, s.args()
	if s.ns != nil {
		// ip netns exec runs the server in the namespace (it execs, so the
		// process is redis-server itself and Kill reaches it).
		name, args = "ip", append([]string{"netns", "exec", s.ns.Server, bin}, args...)
	}
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	out, err := os.Create(filepath.Join(s.dir, "redis.out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	logged := s.logSize() // what earlier launches logged: not this one's
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-done:
			err := fmt.Errorf("redistest: redis-server exited before answering PING (%v):\n%s", cmd.ProcessState, s.logs())
			if s.loggedSince(logged, "Address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		default:
		}
		if err := s.ping(cmd.Process.Pid); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redistest: redis-server did not answer PING within %v: %v\n%s", startTimeout, err, s.logs())
		}
		time.Sleep(5 * time.Millisecond) // polling for readiness, not timing anything
	}
}

// ping sends PING over a fresh connection and expects +PONG, then asks
// INFO server and expects pid as the process_id: a server that another
// process started on the same port answers PING too.
func (s *Server) ping(pid int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, "$"), "\r\n"))
	if !strings.HasPrefix(line, "$") || err != nil {
		return fmt.Errorf("INFO server answered %q", line)
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(r, info); err != nil {
		return err
	}
	if want := fmt.Sprintf("\r\nprocess_id:%d\r\n", pid); !strings.Contains(string(info), want) {
		return fmt.Errorf("another redis-server answers at %s %s (%s not in INFO server)", s.Network(), s.Addr(), strings.TrimSpace(want))
	}
	return nil
}

func (s *Server) dial(ctx context.Context) (net.Conn, error) {
	if s.ns != nil {
		return s.ns.DialContext(ctx, "tcp", s.addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, s.Network(), s.Addr())
}

// logSize returns the size of the server's log file, 0 if there is none.
func (s *Server) logSize() int64 {
	fi, err := os.Stat(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// loggedSince reports whether the server's log holds text after its first
// from bytes.
func (s *Server) loggedSince(from int64, text string) bool {
	data, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil || int64(len(data)) < from {
		return false
	}
	return strings.Contains(string(data[from:]), text)
}

// logs returns the server's log and output, for failure messages.
func (s *Server) logs() string {
	var b strings.Builder
	for _, f := range []string{"redis.out", "redis.log"} {
		if data, err := os.ReadFile(filepath.Join(s.dir, f)); err == nil {
			b.Write(data)
		}
	}
	return b.String()
}

// Kill sends SIGKILL to the server and waits until it is gone; the test's
// connections see it die as a crashed server's would. It does nothing when
// the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Restart kills the server if it is running and starts it again with the
// same folder, socket or ports, namespace and persistence, and waits until
// it answers PING. With WithAOF the new server loads every write the old one
// acknowledged; without, it starts empty. Should another process hold one
// of its ports meanwhile, Restart tries again until startTimeout has passed,
// then fails the test.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	bin := serverBinary(s.t)
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.launch(bin)
		if err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) || time.Now().After(deadline) {
			s.t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // polling for the port to be free, not timing anything
	}
}

func (s *Server) stop() {
	s.Kill()
}

// Network returns "unix" for a server on a unix socket and "tcp" otherwise,
// as redis.Options.Network takes it.
func (s *Server) Network() string {
	if s.sock != "" {
		return "unix"
	}
	return "tcp"
}

// Addr returns the socket path of a unix server, or host:port.
func (s *Server) Addr() string {
	if s.sock != "" {
		return s.sock
	}
	return s.addr
}

// URL returns the server's address as a URL that redis.ParseURL reads:
// unix:///path/to/socket or redis://host:port. A server InNetns is
// reachable at its URL only from the client's namespace (Netns.Client).
func (s *Server) URL() string {
	if s.sock != "" {
		return "unix://" + s.sock
	}
	return "redis://" + s.addr
}

// TLSAddr returns the host:port of the TLS listener of a server WithTLS,
// or "".
func (s *Server) TLSAddr() string {
	if s.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort(loopback, strconv.Itoa(s.tlsPort))
}

// Netns returns the namespaces of a server started InNetns, or nil.
func (s *Server) Netns() *Netns { return s.ns }

// BlackHole cuts the link to a server started InNetns: from now on every
// packet between client and server vanishes, with no refusal and no reset,
// as with a dead host or a partitioned network. Heal restores the link. It
// fails the test for a server not started InNetns.
func (s *Server) BlackHole() {
	s.t.Helper()
	if s.ns == nil {
		s.t.Fatal("redistest: BlackHole needs a server started with InNetns")
	}
	s.ns.setLink(s.t, false)
}

// Heal restores the link that BlackHole cut, and returns once a new
// connection from the client's namespace reaches the server (a link set up
// is not at once a link that carries packets); connections whose packets
// were lost resume once TCP retransmits them. It fails the test when the
// server is not reachable within a minute.
func (s *Server) Heal() {
	s.t.Helper()
	if s.ns == nil {
		s.t.Fatal("redistest: Heal needs a server started with InNetns")
	}
	s.ns.setLink(s.t, true)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		c, err := s.ns.DialContext(ctx, s.Network(), s.Addr())
		cancel()
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: the server is not reachable after Heal: %v", err)
		}
	}
}

// Options returns a copy of o (nil for the zero Options) with Network, Addr
// and, for a server InNetns, Dialer set to reach the server. Set the
// timeouts and retries the test needs on o; a Dialer in o is replaced for a
// server InNetns, and its DialTimeout is honoured through the context.
func (s *Server) Options(o *redis.Options) *redis.Options {
	var c redis.Options
	if o != nil {
		c = *o
	}
	c.Network, c.Addr = s.Network(), s.Addr()
	if s.ns != nil {
		c.Dialer = s.ns.DialContext
	}
	return &c
}

// Client returns a client of the server built from Options(o), closed when
// the test ends.
func (s *Server) Client(o *redis.Options) *redis.Client {
	c := redis.NewClient(s.Options(o))
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}
