package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The addresses of the two ends of a Netns link. Every Netns has its own pair
// of namespaces, which hold nothing but loopback and this link, so every
// Netns uses the same addresses and nothing sent to them can ever leave the
// machine: neither namespace has a route anywhere else.
const (
	ClientIP = "10.213.0.1"
	ServerIP = "10.213.0.2"
)

// fixed MAC addresses, so that each end can hold a permanent neighbour entry
// for the other: a cut link then drops packets silently instead of failing
// address resolution (which would report "no route to host" after ~3s, a
// refusal of sorts rather than a black hole).
const (
	clientMAC = "02:c1:00:00:00:01"
	serverMAC = "02:c1:00:00:00:02"
)

// Netns is a pair of network namespaces made for one test, joined by a veth
// link: the server's (Server) and the client's (Client). A process run with
// "ip netns exec NAME" lives in one of them; DialContext connects from the
// client's. The namespaces and the link are deleted when the test ends.
// Making them needs root: NewNetns fails the test otherwise. Its methods are
// safe for concurrent use; the zero value is not usable: get one from
// NewNetns (or Server.Netns).
type Netns struct {
	Server, Client string // namespace names, for ip netns exec
	sLink, cLink   string // veth ends
}

// NewNetns makes a pair of namespaces joined by a veth link, with ClientIP
// and ServerIP on its two ends and the link up, and deletes them when t
// ends. It fails t when not run as root or when ip(8) fails.
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("redistest: network namespaces need root (CI runs as root); run this test as root")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := "crl" + hex.EncodeToString(b[:]) // 11 bytes: interface names hold 15
	n := &Netns{Server: id + "s", Client: id + "c", sLink: id + "s", cLink: id + "c"}
	t.Cleanup(func() {
		// Deleting a namespace deletes the veth end inside it, and with it
		// the other end.
		_ = exec.Command("ip", "netns", "del", n.Server).Run()
		_ = exec.Command("ip", "netns", "del", n.Client).Run()
	})
	steps := [][]string{
		{"netns", "add", n.Server},
		{"netns", "add", n.Client},
		{"link", "add", n.cLink, "address", clientMAC, "netns", n.Client, "type", "veth", "peer", "name", n.sLink, "address", serverMAC, "netns", n.Server},
		{"-n", n.Client, "addr", "add", ClientIP + "/30", "dev", n.cLink},
		{"-n", n.Server, "addr", "add", ServerIP + "/30", "dev", n.sLink},
		{"-n", n.Client, "neigh", "replace", ServerIP, "lladdr", serverMAC, "dev", n.cLink, "nud", "permanent"},
		{"-n", n.Server, "neigh", "replace", ClientIP, "lladdr", clientMAC, "dev", n.sLink, "nud", "permanent"},
		{"-n", n.Client, "link", "set", "lo", "up"},
		{"-n", n.Server, "link", "set", "lo", "up"},
		{"-n", n.Client, "link", "set", n.cLink, "up"},
		{"-n", n.Server, "link", "set", n.sLink, "up"},
	}
	for _, s := range steps {
		ip(t, s...)
	}
	return n
}

// setLink sets the server's end of the link up or down. Down, the client's
// end has no carrier and drops what it is given to send; the server's end
// drops everything: packets vanish both ways without an error to anyone.
func (n *Netns) setLink(t testing.TB, up bool) {
	t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	ip(t, "-n", n.Server, "link", "set", n.sLink, state)
	if up {
		// Taking the link down dropped the neighbour entry and the route of
		// the server's end; put the entry back (the route comes back with
		// the address when the link is up).
		ip(t, "-n", n.Server, "neigh", "replace", ClientIP, "lladdr", clientMAC, "dev", n.sLink, "nud", "permanent")
	}
}

func ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// DialContext connects to address from the client's namespace. Its signature
// is that of redis.Options.Dialer. The socket is made on an OS thread
// switched into the namespace for that one call; the connection keeps the
// namespace after the thread switches back.
func (n *Netns) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// A thread that cannot be switched back stays locked, so the
		// runtime ends it with this goroutine rather than reuse it.
		runtime.LockOSThread()
		c, restored, err := n.dialIn(ctx, network, address)
		if restored {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// dialIn switches the current (locked) thread into the client's namespace,
// dials, and switches back; restored is false when it could not switch back.
func (n *Netns) dialIn(ctx context.Context, network, address string) (c net.Conn, restored bool, err error) {
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return nil, true, err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + n.Client)
	if err != nil {
		return nil, true, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("redistest: enter namespace %s: %w", n.Client, err)
	}
	var d net.Dialer
	c, err = d.DialContext(ctx, network, address)
	if e := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); e != nil {
		return c, false, err
	}
	return c, true, err
}
