//go:build unix

package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxNotify is the longest notify datagram read whole (systemd reads no
// more either); a longer one is cut.
const maxNotify = 4096

// notifier is the socket of systemd's notify protocol (sd_notify(3)) that
// the program of every run finds in NOTIFY_SOCKET: a unix datagram socket
// that crashloop owns, in a folder of its own that only crashloop's user
// may enter (mode 0700). Each datagram holds newline-separated KEY=VALUE
// assignments, such as "READY=1" or "STATUS=loading"; handle receives each
// datagram as it arrives. File descriptors sent along (FDSTORE=1) are
// refused: the kernel closes them, as nothing reads them.
type notifier struct {
	dir, path string
	handle    func(msg string)
	conn      *net.UnixConn
	raw       syscall.RawConn
	done      chan struct{}

	mu  sync.Mutex // one reader at a time, so drain sees all that came before it
	buf []byte
}

// newNotifier creates the socket and starts reading it; close removes it.
func newNotifier(handle func(msg string)) (*notifier, error) {
	dir, err := os.MkdirTemp("", "crashloop-")
	if err != nil {
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	n := &notifier{dir: dir, path: filepath.Join(dir, "notify"), handle: handle, done: make(chan struct{}), buf: make([]byte, maxNotify)}
	n.conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err == nil {
		n.raw, err = n.conn.SyscallConn()
	}
	if err != nil {
		os.RemoveAll(dir)
		if len(n.path) >= len(unix.RawSockaddrUnix{}.Path) { // sun_path holds the path and a NUL
			return nil, fmt.Errorf("notify socket %s: the path is too long for a unix socket; set TMPDIR to a shorter folder", n.path)
		}
		return nil, fmt.Errorf("notify socket %s: %w", n.path, err)
	}
	go func() {
		defer close(n.done)
		// Read calls the function whenever the socket is readable, until
		// the socket is closed.
		_ = n.raw.Read(func(fd uintptr) bool {
			n.read(fd, true)
			return false
		})
	}()
	return n, nil
}

// drain hands over every datagram sent before it was called. Call it once a
// run's program has exited, so that a READY=1 sent just before the exit
// counts for the run.
func (n *notifier) drain() { _ = n.raw.Control(func(fd uintptr) { n.read(fd, true) }) }

// discard drops every datagram sent so far: what a run that has ended sent.
func (n *notifier) discard() { _ = n.raw.Control(func(fd uintptr) { n.read(fd, false) }) }

// read reads the socket (non-blocking) until it is empty.
func (n *notifier) read(fd uintptr, deliver bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for {
		k, err := syscall.Read(int(fd), n.buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // EAGAIN: nothing more for now
			return
		}
		if deliver {
			n.handle(string(n.buf[:k]))
		}
	}
}

// close stops reading and removes the socket and its folder.
func (n *notifier) close() {
	n.conn.Close()
	<-n.done
	os.RemoveAll(n.dir)
}
