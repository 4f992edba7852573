//go:build unix

package main

import (
	"net"
	"strconv"
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
