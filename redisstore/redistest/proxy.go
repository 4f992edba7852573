package redistest

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SlowProxy stands between clients and a Server and holds every reply of the
// server back by a delay before passing it on, like a server that has become
// slow (swapping, a long-running command, an overloaded host). Requests pass
// at once. It listens on a unix socket in the test's temporary folder and
// closes every connection when the test ends. Its methods are safe for
// concurrent use. The zero value is not usable: get one from NewSlowProxy.
type SlowProxy struct {
	srv   *Server
	ln    net.Listener
	sock  string
	delay atomic.Int64 // time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	closed chan struct{} // closed by close: ends every delay at once
}

// NewSlowProxy starts a proxy to srv that delays each reply by delay.
func NewSlowProxy(t testing.TB, srv *Server, delay time.Duration) *SlowProxy {
	t.Helper()
	p := &SlowProxy{srv: srv, sock: filepath.Join(t.TempDir(), "p.sock"), conns: map[net.Conn]struct{}{}, closed: make(chan struct{})}
	p.delay.Store(int64(delay))
	ln, err := net.Listen("unix", p.sock)
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

// Options returns a copy of o (nil for the zero Options) with Network and
// Addr set to reach the server through the proxy.
func (p *SlowProxy) Options(o *redis.Options) *redis.Options {
	var c redis.Options
	if o != nil {
		c = *o
	}
	c.Network, c.Addr = "unix", p.sock
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
		p.wg.Add(2)
		go func() { // requests: at once
			defer p.wg.Done()
			_, _ = io.Copy(up, c)
			_ = up.Close()
		}()
		go func() { // replies: each read is passed on delay after it arrived
			defer p.wg.Done()
			p.replies(c, up)
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

// replies reads the server's replies and writes each to the client once its
// delay has passed. Replies keep their order; delays of replies read one
// after another overlap rather than add up.
func (p *SlowProxy) replies(client, server net.Conn) {
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
