//go:build unix

package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowNotifier returns a notifier whose handler takes 100µs a datagram, so
// that its reader lags behind a burst, and the datagrams it handled.
func slowNotifier(t *testing.T) (*notifier, func() []string, net.Conn) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	n, err := newNotifier(func(msg string) {
		time.Sleep(100 * time.Microsecond)
		mu.Lock()
		got = append(got, msg)
		mu.Unlock()
	}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(n.close)
	conn, err := net.Dial("unixgram", n.path)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return n, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}, conn
}

// TestDrainHandsOverWhatCameBefore: once drain returns, every datagram sent
// before it was handled, however far behind the reader is.
func TestDrainHandsOverWhatCameBefore(t *testing.T) {
	n, got, conn := slowNotifier(t)
	var want []string
	for i := range 50 {
		want = append(want, strconv.Itoa(i))
		_, err := conn.Write([]byte(want[i]))
		require.NoError(t, err)
	}
	n.drain()
	assert.Equal(t, want, got())
}

// TestDiscardDropsWhatCameBefore: no datagram sent before discard is handled
// after it returns.
func TestDiscardDropsWhatCameBefore(t *testing.T) {
	n, got, conn := slowNotifier(t)
	for i := range 50 {
		_, err := conn.Write([]byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	n.discard()
	before := len(got())
	_, err := conn.Write([]byte("after"))
	require.NoError(t, err)
	n.drain()
	assert.Equal(t, "after", got()[before], "handled after discard: %v", got()[before:])
}

// TestNotifySocketPathTooLong: a $TMPDIR so long that the socket's path
// does not fit in a unix socket address is passed over for the next place,
// $XDG_RUNTIME_DIR here, with one line that says why, and no folder is
// left behind in $TMPDIR.
func TestNotifySocketPathTooLong(t *testing.T) {
	tmp, xdg := filepath.Join(t.TempDir(), strings.Repeat("d", 120)), t.TempDir()
	require.NoError(t, os.Mkdir(tmp, 0o700))
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	var log bytes.Buffer
	n, err := newNotifier(func(string) {}, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	require.NoError(t, err)
	defer n.close()
	assert.Equal(t, xdg, filepath.Dir(n.dir))
	assert.Equal(t, filepath.Join(n.dir, "notify"), n.path)
	assert.Equal(t, `level=INFO msg="the notify socket is `+n.path+`: none could be made in `+tmp+` (the path is too long for a unix socket)" notify_socket=`+n.path+"\n", log.String())
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left)
}
