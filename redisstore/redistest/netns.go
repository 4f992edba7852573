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
	setEnd(t, n.Server, n.sLink, ClientIP, clientMAC, up)
}

// setEnd sets the end link of a veth link in namespace ns up or down; up,
// it puts back the permanent neighbour entry of the far end (peerIP at
// peerMAC), which taking the link down dropped (the route comes back with
// the address when the link is up).
func setEnd(t testing.TB, ns, link, peerIP, peerMAC string, up bool) {
	t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	ip(t, "-n", ns, "link", "set", link, state)
	if up {
		ip(t, "-n", ns, "neigh", "replace", peerIP, "lladdr", peerMAC, "dev", link, "nud", "permanent")
	}
}

// Peer is one more network namespace of a Netns, joined to the server's
// namespace by a veth link of its own: a process run in it with "ip netns
// exec NS" reaches the server at ServerIP over that link alone, and Cut
// makes its packets vanish while every other peer and the client's
// namespace still reach the server. The zero value is not usable: get one
// from Netns.AddPeer. Its methods are safe for concurrent use.
type Peer struct {
	NS string // the namespace's name, for ip netns exec
	IP string // the peer's address on its link

	n                  *Netns
	serverIP           string // the server's end of the link
	link, serverLink   string // veth ends: in NS, in n.Server
	peerMAC, serverMAC string
}

// AddPeer makes peer number i (1 to 99) of n: a namespace joined to the
// server's by a veth link, with address 10.213.i.1 in the peer and
// 10.213.i.2 on the server's end, the link up and a route to ServerIP over
// it. The namespace is deleted when t ends. It fails t for an i out of
// range, or when ip(8) fails.
func (n *Netns) AddPeer(t testing.TB, i int) *Peer {
	t.Helper()
	if i < 1 || i > 99 {
		t.Fatalf("redistest: AddPeer: peer number %d is not within 1 to 99", i)
	}
	id := fmt.Sprintf("%sp%d", strings.TrimSuffix(n.Server, "s"), i) // at most 14 bytes, and its server end 15: the most an interface name holds
	p := &Peer{NS: id, IP: fmt.Sprintf("10.213.%d.1", i), n: n, serverIP: fmt.Sprintf("10.213.%d.2", i),
		link: id, serverLink: id + "s",
		peerMAC: fmt.Sprintf("02:c1:00:00:%02x:01", i), serverMAC: fmt.Sprintf("02:c1:00:00:%02x:02", i)}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.NS).Run() })
	steps := [][]string{
		{"netns", "add", p.NS},
		{"link", "add", p.link, "address", p.peerMAC, "netns", p.NS, "type", "veth", "peer", "name", p.serverLink, "address", p.serverMAC, "netns", n.Server},
		{"-n", p.NS, "addr", "add", p.IP + "/30", "dev", p.link},
		{"-n", n.Server, "addr", "add", p.serverIP + "/30", "dev", p.serverLink},
		{"-n", p.NS, "neigh", "replace", p.serverIP, "lladdr", p.serverMAC, "dev", p.link, "nud", "permanent"},
		{"-n", n.Server, "neigh", "replace", p.IP, "lladdr", p.peerMAC, "dev", p.serverLink, "nud", "permanent"},
		{"-n", p.NS, "link", "set", "lo", "up"},
		{"-n", p.NS, "link", "set", p.link, "up"},
		{"-n", n.Server, "link", "set", p.serverLink, "up"},
		{"-n", p.NS, "route", "add", ServerIP + "/32", "via", p.serverIP, "dev", p.link},
	}
	for _, s := range steps {
		ip(t, s...)
	}
	return p
}

// Cut takes the server's end of the peer's link down: every packet between
// the peer and the server vanishes, with no refusal and no reset, as
// Server.BlackHole does for the client's namespace.
func (p *Peer) Cut(t testing.TB) {
	t.Helper()
	setEnd(t, p.n.Server, p.serverLink, p.IP, p.peerMAC, false)
}

// Mend sets the server's end of the peer's link up again; connections
// whose packets were lost resume once TCP retransmits them.
func (p *Peer) Mend(t testing.TB) {
	t.Helper()
	setEnd(t, p.n.Server, p.serverLink, p.IP, p.peerMAC, true)
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
