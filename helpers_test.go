package crashloop_test

// The helpers of the tests of package crashloop_test: one start time, one
// mock clock, one event recorder, and the Supervisor's test vocabulary.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/eventrec"
	"github.com/crashloopguard/crashloop/share"
	"github.com/stretchr/testify/require"
)

// testT0 is the wall time the tests that use explicit times start from: a
// fixed UTC instant, so that events and JSON snapshots carry exact,
// readable times. (Tests inside a synctest bubble start from the bubble's
// 2000-01-01T00:00:00Z.)
var testT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// mockAt returns a mock clock set to at.
func mockAt(at time.Time) *clock.Mock {
	c := clock.NewMock()
	c.Set(at)
	return c
}

// supEvent is an event as recorder.events gives it: At is its time as an
// offset from the recorder's start, and Event.Time is zeroed.
type supEvent struct {
	At time.Duration
	crashloop.Event
}

// recorder is the event recorder of the tests (internal/eventrec), with
// the events timed from start, when it was made (inside a synctest bubble,
// the bubble's time). It is safe for concurrent use.
type recorder struct {
	eventrec.Recorder[crashloop.Event]
	start time.Time
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

// events returns the events recorded so far, each timed from start.
func (r *recorder) events() []supEvent {
	evs := r.All()
	out := make([]supEvent, 0, len(evs))
	for _, ev := range evs {
		at := ev.Time.Sub(r.start)
		ev.Time = time.Time{}
		out = append(out, supEvent{At: at, Event: ev})
	}
	return out
}

// count returns how many events of kind were recorded.
func (r *recorder) count(kind crashloop.EventKind) int {
	return r.Count(func(ev crashloop.Event) bool { return ev.Kind == kind })
}

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

func restartEv(at time.Duration, key, inc, reason string, cause error, total int, backoff time.Duration) supEvent {
	return supEvent{At: at, Event: crashloop.Event{Kind: crashloop.EventRestartScheduled, Key: key, Incarnation: inc,
		Reason: reason, LastError: cause, Attempts: total, Backoff: backoff}}
}

func millis(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// sleepOrDone sleeps d, or returns ctx.Err() if ctx ends first.
func sleepOrDone(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func eventsOf(r *recorder, kind crashloop.EventKind) []supEvent {
	var out []supEvent
	for _, ev := range r.events() {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
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

// layers maps each Supervisor made by newShared to its Layer.
var layers sync.Map

// newShared returns a Supervisor that shares its state through l, as a
// program does with crashloop.WithSharing(share.New(l)).
func newShared(cfg crashloop.SupervisorConfig, l share.Ledger, opts ...crashloop.Option) (*crashloop.Supervisor, error) {
	if l == nil {
		return crashloop.NewSupervisor(cfg, opts...)
	}
	layer := share.New(l)
	s, err := crashloop.NewSupervisor(cfg, append(opts, crashloop.WithSharing(layer))...)
	if err == nil {
		layers.Store(s, layer)
	}
	return s, err
}

// layerOf returns the Layer of a Supervisor made by newShared (nil for
// one made otherwise).
func layerOf(s *crashloop.Supervisor) *share.Layer {
	l, _ := layers.Load(s)
	y, _ := l.(*share.Layer)
	return y
}
