//go:build unix

package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The default bounds of the stderr tail a park keeps.
const (
	defaultTailLines = 20
	defaultTailBytes = 4096
	maxTailBytes     = 1 << 20 // the largest --stderr-tail-bytes: the tail goes into every record of the park
)

// stderrTail keeps the last lines a run's program wrote on stderr, bounded
// to lines lines and bytes bytes, whichever is less. Its memory is one
// buffer of bytes bytes, whatever the program writes. It is safe for
// concurrent use.
type stderrTail struct {
	lines int

	mu    sync.Mutex
	ring  []byte // the last len(ring) bytes written, from ring[next] on (once full)
	next  int
	full  bool
	ended bool // the last byte written ended a line
}

func newStderrTail(lines, bytes int) *stderrTail {
	return &stderrTail{lines: lines, ring: make([]byte, bytes)}
}

// Write keeps the end of p; it never fails.
func (t *stderrTail) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = p[n-1] == '\n'
	if len(p) >= len(t.ring) {
		copy(t.ring, p[len(p)-len(t.ring):])
		t.next, t.full = 0, true
		return n, nil
	}
	k := copy(t.ring[t.next:], p)
	if k < len(p) {
		copy(t.ring, p[k:])
		t.full = true
	}
	t.next = (t.next + len(p)) % len(t.ring)
	if t.next == 0 {
		t.full = true
	}
	return n, nil
}

// String returns the tail: the last lines whole (the first one cut at the
// byte bound, and starting at a whole character), each ending in a newline
// but the last, which is cut when the program wrote no newline after it.
func (t *stderrTail) String() string {
	t.mu.Lock()
	var b []byte
	if t.full {
		b = append(append(b, t.ring[t.next:]...), t.ring[:t.next]...)
	} else {
		b = append(b, t.ring[:t.next]...)
	}
	ended := t.ended
	t.mu.Unlock()
	body := b
	if ended {
		body = b[:len(b)-1]
	}
	for i, n := len(body)-1, 0; i >= 0; i-- { // cut before the line that is one too many
		if body[i] == '\n' {
			if n++; n == t.lines {
				b = b[i+1:]
				break
			}
		}
	}
	for len(b) > 0 && !utf8.RuneStart(b[0]) { // a character cut by the byte bound
		b = b[1:]
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}

// stderrCopy passes a run's stderr on to crashloop's (dst) and keeps its
// tail: a pipe whose write end is the program's stderr. Its buffer is of a
// fixed size; a failing dst (closed) does not stop the copy, so the
// program never blocks on its stderr.
type stderrCopy struct {
	w    *os.File // the program's stderr; the caller closes it once the program has it
	tail *stderrTail
	done chan struct{} // closed once every writer has closed the pipe
}

// copyStderr starts a copy to dst keeping a tail of lines lines and bytes
// bytes.
func copyStderr(dst io.Writer, lines, bytes int) (*stderrCopy, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c := &stderrCopy{w: w, tail: newStderrTail(lines, bytes), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer r.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				c.tail.Write(buf[:n])
				_, _ = dst.Write(buf[:n]) // a closed stderr loses the output, not the tail
			}
			if err != nil {
				return
			}
		}
	}()
	return c, nil
}

// tailWait bounds the wait, once a run's process group is gone, for the
// last of its stderr: only a process that left the group (a daemon that
// detached) still holds the pipe then, and the tail is taken without it.
const tailWait = 200 * time.Millisecond

// stderrTail returns the tail of the group's stderr once the group is
// gone, "" when the tail is off.
func (g *group) stderrTail() string {
	if g.stderr == nil {
		return ""
	}
	t := time.NewTimer(tailWait)
	defer t.Stop()
	select {
	case <-g.stderr.done:
	case <-t.C:
	}
	return g.stderr.tail.String()
}

// lastWords returns "; last on stderr: LINE" with the last line of tail
// that is not blank, for a message; "" when there is none.
func lastWords(tail string) string {
	if line := lastLine(tail); line != "" {
		return "; last on stderr: " + line
	}
	return ""
}

// lastLine returns the last line of text that is not blank, trimmed; ""
// if there is none.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if line := strings.TrimSpace(lines[i]); line != "" {
			return line
		}
	}
	return ""
}
