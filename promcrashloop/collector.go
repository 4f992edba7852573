package promcrashloop

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/crashloopguard/crashloop"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var (
	restartsDesc = prometheus.NewDesc("crashloop_restarts_total",
		"Restarts of the key this supervisor scheduled since it first ran the key or the key was last resumed (KeyStatus.LocalRestarts: with a shared ledger, this replica's own, so that a sum over replicas is the deployment's); a resume starts it again from 0.",
		[]string{"key"}, nil)
	parkedDesc = prometheus.NewDesc("crashloop_parked",
		"1 while the key is parked (a guard gave up, or its chain needs a human), with the park reason; the series disappears when the key is resumed.",
		[]string{"key", "reason"}, nil)
	parkedSinceDesc = prometheus.NewDesc("crashloop_parked_since_timestamp_seconds",
		"When the key was parked, in seconds since 1970 (ParkedError.Since); the series exists while the key is parked.",
		[]string{"key"}, nil)
	keyStateDesc = prometheus.NewDesc("crashloop_key_state",
		"1 for the key's current state (running, backoff, held, parked, needs_human, exited); the key has no series for the other states.",
		[]string{"key", "state"}, nil)
	keysDesc = prometheus.NewDesc("crashloop_keys",
		"Keys the supervisor knows, by state, including those left out of the keyed series by a key cap.",
		[]string{"state"}, nil)
	fleetTrippedDesc = prometheus.NewDesc("crashloop_fleet_breaker_tripped",
		"1 while the fleet breaker is tripped and restarts are held, 0 when it is armed.",
		nil, nil)
	fleetRestartsDesc = prometheus.NewDesc("crashloop_fleet_restarts_in_hour",
		"Restarts the fleet breaker counted in its rolling hour (it trips at fleet.restarts_per_hour).",
		nil, nil)
	fleetFailingDesc = prometheus.NewDesc("crashloop_fleet_failing_keys",
		"Fleet members failing (parked or needing a human); with a shared ledger, the deployment's failing keys, each once.",
		nil, nil)
	fleetTotalDesc = prometheus.NewDesc("crashloop_fleet_keys",
		"Fleet members (keys running, waiting to run or parked); with a shared ledger, the deployment's live keys, each once.",
		nil, nil)
)

// states are the states crashloop_keys always has a series for, 0 or more.
var states = []crashloop.KeyState{
	crashloop.StateRunning, crashloop.StateBackoff, crashloop.StateHeld,
	crashloop.StateParked, crashloop.StateNeedsHuman, crashloop.StateExited,
}

// Collector is a prometheus.Collector that exports the state of a
// crashloop.Supervisor. Each Collect reads Supervisor.Status, so a scrape
// always sees the state of that moment, and formats it after Status has
// returned: no lock of the Supervisor is held while a scrape is written, so
// a scrape never delays a decision.
//
// Series per key (see WithMaxKeys to cap them): crashloop_restarts_total,
// crashloop_key_state (the current state only) and, while the key is
// parked, crashloop_parked and crashloop_parked_since_timestamp_seconds.
// Unkeyed: crashloop_keys by state and, when the fleet breaker is on, the
// crashloop_fleet_* gauges.
//
// With a shared ledger (crashloop.WithSharing), each replica's
// crashloop_restarts_total counts the restarts it scheduled itself, so a
// sum over replicas is the deployment's; the parks and the fleet gauges
// are the shared state, which every replica exports alike: aggregate them
// across replicas with max, never sum (docs/monitoring.md).
//
// A Collector is safe for concurrent use. The zero value is not usable:
// create one with NewCollector.
type Collector struct {
	sup     *crashloop.Supervisor
	maxKeys int // < 0: no cap
}

// Option configures a Collector; NewCollector applies them in order and
// ignores a nil Option.
type Option func(*Collector)

// WithMaxKeys caps the keys that get keyed series at n. When the Supervisor
// knows more keys, parked keys come first, then the keys with the most
// restarts, then the keys in name order; the others are counted only in
// crashloop_keys. With n 0 no series has a key label. A negative n means no
// cap, the default.
func WithMaxKeys(n int) Option {
	return func(c *Collector) { c.maxKeys = n }
}

// NewCollector returns a Collector of sup, which must not be nil. By
// default every key is exported (see WithMaxKeys). A registry takes one
// Collector: to export several Supervisors into one, register each through
// prometheus.WrapRegistererWith and a label that tells them apart.
func NewCollector(sup *crashloop.Supervisor, opts ...Option) *Collector {
	c := &Collector{sup: sup, maxKeys: -1}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// Describe sends the descriptors of every series the Collector can export.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{restartsDesc, parkedDesc, parkedSinceDesc, keyStateDesc, keysDesc,
		fleetTrippedDesc, fleetRestartsDesc, fleetFailingDesc, fleetTotalDesc} {
		ch <- d
	}
}

// Collect reads the Supervisor's Status and sends its series. It may run
// while the Supervisor decides and while other scrapes run. A scrape has no
// context: the fleet breaker of a shared ledger is asked under the ledger's
// own timeout alone.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.sup.Status(context.Background())

	perState := make(map[crashloop.KeyState]int, len(states))
	for _, s := range states {
		perState[s] = 0
	}
	for _, ks := range st.Keys {
		perState[ks.State]++
	}
	for s, n := range perState {
		ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(n), string(s))
	}

	keys := c.keyed(st.Keys)
	all := make([]keySeries, len(keys)) // one allocation for every keyed series
	for i, key := range keys {
		ks := &all[i]
		ks.fill(key, st.Keys[key])
		ch <- &ks.restarts
		ch <- &ks.state
		if ks.parked.desc != nil {
			ch <- &ks.parked
			ch <- &ks.since
		}
	}

	if f := st.Fleet; f != nil {
		ch <- prometheus.MustNewConstMetric(fleetTrippedDesc, prometheus.GaugeValue, bit(f.BreakerTripped))
		ch <- prometheus.MustNewConstMetric(fleetRestartsDesc, prometheus.GaugeValue, float64(f.RestartsInHour))
		ch <- prometheus.MustNewConstMetric(fleetFailingDesc, prometheus.GaugeValue, float64(f.FailingKeys))
		ch <- prometheus.MustNewConstMetric(fleetTotalDesc, prometheus.GaugeValue, float64(f.Keys))
	}
}

// keyed returns the keys that get keyed series, in name order (the order
// a registry sorts them in, which makes its sort cheap): all of them
// without a cap, else the first maxKeys by park, restarts and name.
func (c *Collector) keyed(keys map[string]crashloop.KeyStatus) []string {
	all := make([]string, 0, len(keys))
	for key := range keys {
		all = append(all, key)
	}
	if c.maxKeys >= 0 && len(all) > c.maxKeys {
		slices.SortFunc(all, func(a, b string) int {
			ka, kb := keys[a], keys[b]
			return cmp.Or(
				-cmp.Compare(bit(ka.Reason != ""), bit(kb.Reason != "")),
				-cmp.Compare(ka.TotalRestarts, kb.TotalRestarts),
				cmp.Compare(a, b))
		})
		all = all[:c.maxKeys]
	}
	slices.Sort(all)
	return all
}

// bit is 1 for true and 0 for false.
func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// keySeries holds the series of one key. A scrape of many keys is mostly
// these, so they are made in one allocation for all keys and written
// straight into the registry's dto.Metric: MustNewConstMetric would cost
// a dozen allocations a series, to copy, sort and check labels that are
// right by construction here.
type keySeries struct {
	restarts, state, parked, since keyedSeries
	key, stateName, reason         string
	keyPair, statePair, reasonPair dto.LabelPair
	keyLabels                      [1]*dto.LabelPair
	stateLabels, reasonLabels      [2]*dto.LabelPair
	count, sinceSeconds            float64
	counter                        dto.Counter
	present, parkedAt              dto.Gauge
}

// fill sets the series of key from its status. A key or reason that is
// not valid UTF-8 (a key may be any string) has its bad bytes replaced with
// U+FFFD: the registry would otherwise fail the whole scrape.
func (s *keySeries) fill(key string, ks crashloop.KeyStatus) {
	s.key, s.stateName = strings.ToValidUTF8(key, "\uFFFD"), string(ks.State)
	s.keyPair = dto.LabelPair{Name: &keyLabel, Value: &s.key}
	s.statePair = dto.LabelPair{Name: &stateLabel, Value: &s.stateName}
	s.keyLabels = [1]*dto.LabelPair{&s.keyPair}
	s.stateLabels = [2]*dto.LabelPair{&s.keyPair, &s.statePair}
	s.count = float64(ks.LocalRestarts)
	s.counter.Value = &s.count
	s.present.Value = &one
	s.restarts = keyedSeries{desc: restartsDesc, labels: s.keyLabels[:], counter: &s.counter}
	s.state = keyedSeries{desc: keyStateDesc, labels: s.stateLabels[:], gauge: &s.present}
	if ks.Reason != "" {
		s.reason = strings.ToValidUTF8(ks.Reason, "\uFFFD")
		s.reasonPair = dto.LabelPair{Name: &reasonLabel, Value: &s.reason}
		s.reasonLabels = [2]*dto.LabelPair{&s.keyPair, &s.reasonPair}
		s.parked = keyedSeries{desc: parkedDesc, labels: s.reasonLabels[:], gauge: &s.present}
		s.sinceSeconds = float64(ks.ParkedSince.UnixMicro()) / 1e6
		s.parkedAt.Value = &s.sinceSeconds
		s.since = keyedSeries{desc: parkedSinceDesc, labels: s.keyLabels[:], gauge: &s.parkedAt}
	}
}

// Label names of the keyed series, addressable for dto.LabelPair.
var keyLabel, stateLabel, reasonLabel = "key", "state", "reason"

// keyedSeries is one series of a key: a counter, or a gauge.
type keyedSeries struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair // in name order, as the registry wants them
	counter *dto.Counter     // nil for a gauge
	gauge   *dto.Gauge       // nil for a counter
}

// Desc returns the series' descriptor.
func (s *keyedSeries) Desc() *prometheus.Desc { return s.desc }

// Write fills out with the series' labels and value.
func (s *keyedSeries) Write(out *dto.Metric) error {
	out.Label, out.Counter, out.Gauge = s.labels, s.counter, s.gauge
	return nil
}

// one is the value of the keyed gauges that say a state by being there,
// addressable for dto.Gauge.
var one = 1.0
