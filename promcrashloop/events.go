package promcrashloop

import (
	"strings"
	"sync"

	"github.com/crashloopguard/crashloop"
	"github.com/prometheus/client_golang/prometheus"
)

var eventsDesc = prometheus.NewDesc("crashloop_events_total",
	"Events the supervisor published, by dotted kind (agent.respawn_scheduled, agent.startup_exhausted, fleet.breaker_tripped, ...).",
	[]string{"kind"}, nil)

// kinds are the event kinds the library names, found through
// EventKind.String, which names every kind it knows and writes
// "EventKind(N)" for the others. Each has a series from the first scrape,
// so that rate and increase see its first event.
var kinds = func() []crashloop.EventKind {
	var ks []crashloop.EventKind
	for k := crashloop.EventKind(1); !strings.HasPrefix(k.String(), "EventKind("); k++ {
		ks = append(ks, k)
	}
	return ks
}()

// Events is a crashloop.EventHandler that counts the events it is given by
// kind, and a prometheus.Collector that exports the counts as
// crashloop_events_total{kind}. Pass it to crashloop.WithEventHandler
// (with crashloop.MultiHandler beside a logger) and register it.
//
// Every kind the library names has a series from the start, at 0 until its
// first event. An Events is safe for concurrent use. The zero value counts
// from zero and is ready to use; an Events must not be copied after first
// use.
type Events struct {
	mu     sync.Mutex
	counts map[crashloop.EventKind]uint64
}

// HandleEvent counts ev under its kind.
func (e *Events) HandleEvent(ev crashloop.Event) {
	e.mu.Lock()
	if e.counts == nil {
		e.counts = make(map[crashloop.EventKind]uint64)
	}
	e.counts[ev.Kind]++
	e.mu.Unlock()
}

// Describe sends the descriptor of crashloop_events_total.
func (e *Events) Describe(ch chan<- *prometheus.Desc) { ch <- eventsDesc }

// Collect sends crashloop_events_total for every kind the library names and
// every other kind counted.
func (e *Events) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	counts := make(map[crashloop.EventKind]uint64, len(kinds)+len(e.counts))
	for _, k := range kinds {
		counts[k] = 0
	}
	for k, n := range e.counts {
		counts[k] = n
	}
	e.mu.Unlock()
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(n), k.String())
	}
}
