package redistest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SlowProxy stands between clients and a Server and holds every reply of the
// server back by a delay before passing it on, like a server that has become
// slow (swapping, a long-running command, an overloaded host). Requests pass
// at once. LoseReply makes it lose the reply of one command instead, like a
// connection that breaks after the server ran the command. It listens on a
// unix socket in the test's temporary folder (NewSlowProxy) or on a free
// port of 127.0.0.1 (NewTCPProxy), and closes every connection when the
// test ends. Its methods are safe for concurrent use. The zero value is not
// usable: get one from NewSlowProxy or NewTCPProxy.
type SlowProxy struct {
	srv   *Server
	ln    net.Listener
	delay atomic.Int64 // time.Duration

	lose atomic.Pointer[string] // the command whose next reply is lost; nil: none
	lost atomic.Int64           // replies lost

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	closed chan struct{} // closed by close: ends every delay at once
}

// NewSlowProxy starts a proxy to srv on a unix socket that delays each
// reply by delay.
func NewSlowProxy(t testing.TB, srv *Server, delay time.Duration) *SlowProxy {
	t.Helper()
	return startProxy(t, srv, delay, "unix", filepath.Join(t.TempDir(), "p.sock"))
}

// NewTCPProxy starts a proxy to srv on a free port of 127.0.0.1 that passes
// replies at once (SetDelay changes that). A cluster node can tell its
// clients the proxy's address as its own (Server.Announce).
func NewTCPProxy(t testing.TB, srv *Server) *SlowProxy {
	t.Helper()
	return startProxy(t, srv, 0, "tcp", "127.0.0.1:0")
}

func startProxy(t testing.TB, srv *Server, delay time.Duration, network, addr string) *SlowProxy {
	t.Helper()
	p := &SlowProxy{srv: srv, conns: map[net.Conn]struct{}{}, closed: make(chan struct{})}
	p.delay.Store(int64(delay))
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// SetDelay changes the delay of the replies read from now on.
func (p *SlowProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// LoseReply makes the proxy lose the reply of the next request of command
// (a command name, in any case: "EVALSHA"), on whichever connection it
// comes: the request reaches the server, the proxy reads the server's reply
// (so the server has run the command) and, instead of passing it on, closes
// the client's connection and the server's. The client sees its connection
// end (io.EOF) after a command that ran. Later requests pass as usual.
func (p *SlowProxy) LoseReply(command string) {
	command = strings.ToUpper(command)
	p.lose.Store(&command)
}

// Lost returns how many replies LoseReply made the proxy lose.
func (p *SlowProxy) Lost() int { return int(p.lost.Load()) }

// Addr returns the proxy's address: host:port, or the path of its unix
// socket.
func (p *SlowProxy) Addr() string { return p.ln.Addr().String() }

// Options returns a copy of o (nil for the zero Options) with Network and
// Addr set to reach the server through the proxy.
func (p *SlowProxy) Options(o *redis.Options) *redis.Options {
	var c redis.Options
	if o != nil {
		c = *o
	}
	c.Network, c.Addr = p.ln.Addr().Network(), p.Addr()
	return &c
}

// Client returns a client that reaches the server through the proxy, built
// from Options(o) and closed when the test ends.
func (p *SlowProxy) Client(o *redis.Options) *redis.Client {
	c := redis.NewClient(p.Options(o))
	p.srv.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (p *SlowProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := p.srv.dial(context.Background())
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		var losing atomic.Bool // the next reply on this connection is lost
		p.wg.Add(2)
		go func() { // requests: at once
			defer p.wg.Done()
			p.requests(c, up, &losing)
			_ = up.Close()
		}()
		go func() { // replies: each read is passed on delay after it arrived
			defer p.wg.Done()
			p.replies(c, up, &losing)
			_ = c.Close()
		}()
	}
}

// track registers the connections of a new client, or closes them and
// reports false when the proxy is closing.
func (p *SlowProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

type chunk struct {
	data []byte
	due  time.Time
}

// requests passes the client's requests to the server, one at a time, and
// sets losing before it passes the request whose reply LoseReply asked to
// lose. A client that sends one command and waits for its reply (not a
// pipeline) has read every earlier reply by then, so the next bytes the
// server sends are that command's reply.
func (p *SlowProxy) requests(client, server net.Conn, losing *atomic.Bool) {
	rd := bufio.NewReader(client)
	for {
		req, name, err := readRequest(rd)
		if err != nil {
			return
		}
		if want := p.lose.Load(); want != nil && strings.ToUpper(name) == *want && p.lose.CompareAndSwap(want, nil) {
			losing.Store(true)
		}
		if _, err := server.Write(req); err != nil {
			return
		}
	}
}

// readRequest reads one request of the RESP protocol, an array of bulk
// strings (an inline command: one line), and returns its bytes and the
// command's name.
func readRequest(rd *bufio.Reader) (req []byte, name string, err error) {
	line, err := rd.ReadBytes('\n')
	if err != nil {
		return nil, "", err
	}
	if line[0] != '*' {
		name, _, _ = strings.Cut(strings.TrimSpace(string(line)), " ")
		return line, name, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(line[1:])))
	if err != nil {
		return nil, "", fmt.Errorf("redistest: a request of %q", line)
	}
	req = line
	for i := range n {
		head, err := rd.ReadBytes('\n')
		if err != nil {
			return nil, "", err
		}
		size, err := strconv.Atoi(strings.TrimSpace(string(head[1:])))
		if head[0] != '$' || err != nil {
			return nil, "", fmt.Errorf("redistest: a request argument of %q", head)
		}
		arg := make([]byte, size+2) // and its \r\n
		if _, err := io.ReadFull(rd, arg); err != nil {
			return nil, "", err
		}
		if i == 0 {
			name = string(arg[:size])
		}
		req = append(append(req, head...), arg...)
	}
	return req, name, nil
}

// replies reads the server's replies and writes each to the client once its
// delay has passed. Replies keep their order; delays of replies read one
// after another overlap rather than add up. A reply read while losing is
// set ends both connections instead.
func (p *SlowProxy) replies(client, server net.Conn, losing *atomic.Bool) {
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range q {
			if !p.wait(ch.due) {
				_ = server.Close()
				for range q { // drain so the reader never blocks
				}
				return
			}
			if _, err := client.Write(ch.data); err != nil {
				_ = server.Close()
				for range q { // drain so the reader never blocks
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && losing.Load() {
			p.lost.Add(1)
			_ = server.Close()
			_ = client.Close()
			break
		}
		if n > 0 {
			q <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(time.Duration(p.delay.Load()))}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
}

// wait sleeps until due (the simulated slowness itself) and reports true,
// or reports false at once when the proxy closes.
func (p *SlowProxy) wait(due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-p.closed:
		return false
	}
}

func (p *SlowProxy) close() {
	close(p.closed)
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
