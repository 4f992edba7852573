package promcrashloop_test

import (
	"testing"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/promcrashloop"
)

// TestEventsCounts checks that the zero Events has a series at 0 for every
// kind the library names, and counts each event under its dotted kind,
// from several goroutines at once.
func TestEventsCounts(t *testing.T) {
	var events promcrashloop.Events
	if d := diff(collect(t, &events), complete(series{}).only("crashloop_events_total")); d != "" {
		t.Errorf("zero Events:\n%s", d)
	}

	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				events.HandleEvent(crashloop.Event{Kind: crashloop.EventRespawnScheduled, Key: "a"})
			}
			events.HandleEvent(crashloop.Event{Kind: crashloop.EventFleetTripped, Key: "fleet"})
		}()
	}
	for range 4 {
		<-done
	}
	events.HandleEvent(crashloop.Event{Kind: crashloop.EventStoreUnavailable})

	want := complete(series{
		`crashloop_events_total{kind="agent.respawn_scheduled"}`: 400,
		`crashloop_events_total{kind="fleet.breaker_tripped"}`:   4,
		`crashloop_events_total{kind="store.unavailable"}`:       1,
	}).only("crashloop_events_total")
	if d := diff(collect(t, &events), want); d != "" {
		t.Errorf("after 405 events:\n%s", d)
	}
}
