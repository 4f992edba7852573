//go:build unix

package main

import (
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
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
// may enter (mode 0700), or, where no folder can be made (a read-only file
// system), an abstract socket (Linux). Each datagram holds newline-separated
// KEY=VALUE assignments, such as "READY=1" or "STATUS=loading"; handle
// receives each datagram as it arrives. File descriptors sent along
// (FDSTORE=1) are refused: the kernel closes them, as nothing reads them.
// A nil *notifier is no socket: its methods do nothing.
type notifier struct {
	dir, path string // dir is "" for an abstract socket, whose path starts with @
	handle    func(msg string)
	conn      *net.UnixConn
	raw       syscall.RawConn
	done      chan struct{}

	mu  sync.Mutex // one reader at a time, so drain sees all that came before it
	buf []byte
}

// notifyPlaces are the folders where the notify socket's own folder may
// be made, in order: $TMPDIR (or /tmp), then folders that usually stay
// writable when the root file system is read-only.
func notifyPlaces() []string {
	places := []string{os.TempDir()}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		places = append(places, d)
	}
	return append(places, "/run", "/dev/shm")
}

// newNotifier creates the socket, in the first of notifyPlaces where it
// can, else as an abstract socket where there are some, and starts reading
// it; close removes it. When the socket is not in the first place, it logs
// why. The error says why every place failed.
func newNotifier(handle func(msg string), log *slog.Logger) (*notifier, error) {
	var failed []string
	for _, place := range notifyPlaces() {
		n, err := listenNotify(place, handle)
		if err == nil {
			if failed != nil {
				log.Info("the notify socket is "+n.path+": none could be made in "+strings.Join(failed, ", "), "notify_socket", n.path)
			}
			return n, nil
		}
		failed = append(failed, place+" ("+err.Error()+")")
	}
	if abstractSockets {
		n, err := listenNotify("", handle)
		if err == nil {
			log.Info("the notify socket is the abstract socket "+n.path+": none could be made in "+strings.Join(failed, ", "), "notify_socket", n.path)
			return n, nil
		}
		failed = append(failed, "an abstract socket ("+err.Error()+")")
	}
	return nil, errors.New("no notify socket could be made in " + strings.Join(failed, ", "))
}

// listenNotify creates the socket in a new folder in place, or an abstract
// socket if place is "", and starts reading it.
func listenNotify(place string, handle func(msg string)) (*notifier, error) {
	n := &notifier{handle: handle, done: make(chan struct{}), buf: make([]byte, maxNotify)}
	if place == "" {
		n.path = "@crashloop-" + rand.Text()
	} else {
		dir, err := os.MkdirTemp(place, "crashloop-")
		if err != nil {
			return nil, cause(err)
		}
		n.dir, n.path = dir, filepath.Join(dir, "notify")
		if len(n.path) >= len(unix.RawSockaddrUnix{}.Path) { // sun_path holds the path and a NUL
			os.RemoveAll(dir)
			return nil, errors.New("the path is too long for a unix socket")
		}
	}
	var err error
	n.conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err == nil {
		n.raw, err = n.conn.SyscallConn()
	}
	if err != nil {
		if n.dir != "" {
			os.RemoveAll(n.dir)
		}
		return nil, cause(err)
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

// cause returns the system's reason for err, such as "read-only file
// system", without the operation and path that wrap it.
func cause(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// drain hands over every datagram sent before it was called. Call it once a
// run's program has exited, so that a READY=1 sent just before the exit
// counts for the run.
func (n *notifier) drain() {
	if n != nil {
		_ = n.raw.Control(func(fd uintptr) { n.read(fd, true) })
	}
}

// discard drops every datagram sent so far: what a run that has ended sent.
func (n *notifier) discard() {
	if n != nil {
		_ = n.raw.Control(func(fd uintptr) { n.read(fd, false) })
	}
}

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
	if n == nil {
		return
	}
	n.conn.Close()
	<-n.done
	if n.dir != "" {
		os.RemoveAll(n.dir)
	}
}
