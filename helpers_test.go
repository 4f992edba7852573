package crashloop_test

// The helpers of the tests of package crashloop_test: one start time, one
// mock clock, one event recorder, and the Supervisor's test vocabulary.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/suptest"
	"github.com/stretchr/testify/require"
)

// The vocabulary shared with package share's tests (internal/suptest).
var (
	testT0      = suptest.T0
	mockAt      = suptest.MockAt
	newRecorder = suptest.NewRecorder
	eventsOf    = suptest.EventsOf
	millis      = suptest.Millis
	restartEv   = suptest.RestartEv
	newShared   = suptest.NewShared
)

type (
	supEvent = suptest.Event
	recorder = suptest.Recorder
)

// supStarts records the time of each call of a supervised function.
type supStarts struct {
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
}

func newSupStarts() *supStarts { return &supStarts{start: time.Now()} }

// mark records a start now and returns its number (1 for the first).
func (s *supStarts) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, time.Since(s.start))
	return len(s.at)
}

func (s *supStarts) times() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.at...)
}

func newTestSupervisor(t *testing.T, cfg crashloop.SupervisorConfig, opts ...crashloop.Option) *crashloop.Supervisor {
	t.Helper()
	s, err := crashloop.NewSupervisor(cfg, opts...)
	require.NoError(t, err)
	return s
}

func respawnEv(at time.Duration, key string, cause error, attempt int, backoff time.Duration) supEvent {
	return supEvent{At: at, Event: crashloop.Event{Kind: crashloop.EventRespawnScheduled, Key: key, LastError: cause,
		Attempts: attempt, Limit: 3, Window: 60 * time.Second, Backoff: backoff}}
}

func exhaustedEv(at time.Duration, key, reason string, cause error, attempts int) supEvent {
	return supEvent{At: at, Event: crashloop.Event{Kind: crashloop.EventStartupExhausted, Key: key, Reason: reason,
		LastError: cause, Attempts: attempts, Limit: 3, Window: 60 * time.Second}}
}

// sleepOrDone sleeps d, or returns ctx.Err() if ctx ends first.
func sleepOrDone(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func atsOf(r *recorder, kind crashloop.EventKind) []time.Duration {
	var out []time.Duration
	for _, ev := range eventsOf(r, kind) {
		out = append(out, ev.At)
	}
	return out
}

func guardEv(at time.Duration, key, reason string, attempts, limit int, window time.Duration) supEvent {
	return supEvent{At: at, Event: crashloop.Event{Kind: crashloop.EventGuardTripped, Key: key, Reason: reason,
		Attempts: attempts, Limit: limit, Window: window}}
}
