//go:build unix

package main

import (
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
	})
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
// does not fit in a unix socket address is one error that says so and what
// to do, and leaves no folder behind.
func TestNotifySocketPathTooLong(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	require.NoError(t, os.Mkdir(tmp, 0o700))
	t.Setenv("TMPDIR", tmp)
	n, err := newNotifier(func(string) {})
	require.Error(t, err)
	assert.Nil(t, n)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "notify socket "+tmp+"/crashloop-"), msg)
	assert.True(t, strings.HasSuffix(msg, "/notify: the path is too long for a unix socket; set TMPDIR to a shorter folder"), msg)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left)
}
