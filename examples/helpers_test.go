package examples

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/eventrec"
)

// errRefused is the failure of the crash-looping worker in every test.
var errRefused = errors.New("dial tcp 10.0.0.7:5432: connect: connection refused")

// wantStarts are the starts of a crash-looping key under the default
// budget, in bubble time from the test's start: the first start is free,
// then the backoffs 500ms, 1s and 1.5s, and the 4th failure parks it.
var wantStarts = []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second}

// events records a Supervisor's events (internal/eventrec); it is safe for
// concurrent use.
type events struct {
	eventrec.Recorder[crashloop.Event]
}

// of returns the events of key.
func (e *events) of(key string) []crashloop.Event {
	return e.Filter(func(ev crashloop.Event) bool { return ev.Key == key })
}

// count returns how many events of kind were published, for any key.
func (e *events) count(kind crashloop.EventKind) int {
	return e.Count(func(ev crashloop.Event) bool { return ev.Kind == kind })
}

// newSupervisor returns a Supervisor with the default config, which reads
// the real clock: inside a synctest bubble, the bubble's fake clock. Call it
// inside the bubble.
func newSupervisor(t *testing.T) (*crashloop.Supervisor, *events) {
	t.Helper()
	evs := &events{}
	sup, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig(), crashloop.WithEventHandler(evs))
	if err != nil {
		t.Fatal(err)
	}
	return sup, evs
}

// starts records when a function started, in bubble time since the clock
// it was made with.
type starts struct {
	mu    sync.Mutex
	epoch time.Time
	at    []time.Duration
}

func newStarts() *starts { return &starts{epoch: time.Now()} }

func (s *starts) note() {
	s.mu.Lock()
	s.at = append(s.at, time.Since(s.epoch))
	s.mu.Unlock()
}

func (s *starts) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

func (s *starts) times() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at)
}

// checkParked checks that err is the refusal of key, parked by the default
// budget after 3 respawns, whose last failure was errRefused.
func checkParked(t *testing.T, err error, key string) {
	t.Helper()
	var pe *crashloop.ParkedError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *crashloop.ParkedError", err)
	}
	if pe.Key != key || pe.Reason != crashloop.ReasonBudgetExhausted || pe.Attempts != 3 {
		t.Errorf("parked %q (%s after %d), want %q (%s after 3)", pe.Key, pe.Reason, pe.Attempts, key, crashloop.ReasonBudgetExhausted)
	}
	if !errors.Is(err, crashloop.ErrParked) || !errors.Is(err, errRefused) {
		t.Errorf("err = %v, want it to match crashloop.ErrParked and the worker's failure", err)
	}
}

// checkBudgetEvents checks that key was announced as the default budget
// announces a crash loop: three respawns with the backoffs 500ms, 1s and
// 1.5s, then one park, and nothing after (unless more is allowed: the
// events after the park are returned).
func checkBudgetEvents(t *testing.T, evs *events, key string) []crashloop.Event {
	t.Helper()
	got := evs.of(key)
	want := []struct {
		kind    crashloop.EventKind
		backoff time.Duration
	}{
		{crashloop.EventRespawnScheduled, 500 * time.Millisecond},
		{crashloop.EventRespawnScheduled, time.Second},
		{crashloop.EventRespawnScheduled, 1500 * time.Millisecond},
		{crashloop.EventStartupExhausted, 0},
	}
	if len(got) < len(want) {
		t.Fatalf("events of %q: %v, want %d", key, got, len(want))
	}
	for i, w := range want {
		if got[i].Kind != w.kind || got[i].Backoff != w.backoff || !errors.Is(got[i].LastError, errRefused) {
			t.Errorf("event %d of %q: %s backoff %v (%v), want %s backoff %v", i, key, got[i].Kind, got[i].Backoff, got[i].LastError, w.kind, w.backoff)
		}
	}
	if ev := got[3]; ev.Reason != crashloop.ReasonBudgetExhausted || ev.Attempts != 3 || !ev.Kind.Stops() {
		t.Errorf("park event: reason %q after %d, want %q after 3", ev.Reason, ev.Attempts, crashloop.ReasonBudgetExhausted)
	}
	return got[len(want):]
}
