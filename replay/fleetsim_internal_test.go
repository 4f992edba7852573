package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop"
)

// TestSimulateOutageIsBounded: a simulation that would take more
// decisions than its bound stops with an error that says what to change,
// instead of growing without end; the same one within the bound does not.
// (SimulateOutage's bound is 5,000,000: 1000 keys probed every 10s
// through a day's outage would need 17,280,000.) A probe every second is
// one every HealthyAfter (10s): the library lets no probe go before the
// last one's run could be healthy.
func TestSimulateOutageIsBounded(t *testing.T) {
	t.Parallel()
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet, cfg.ProbeAfter, cfg.ProbeMax = nil, time.Second, time.Second
	o := SharedOutage{Outage: time.Minute, Keys: 10}
	_, err := simulateFleet(cfg, o, time.Hour, 100)
	assert.EqualError(t, err, "replay: 1m outage over 10 keys takes more than 100 decisions within the horizon: simulate fewer keys, a shorter outage or a shorter horizon")
	// Per key: 4 starts to the park at 3s, then 7 probes (4s, 14s, ...,
	// 64s), each a claim and a start: 18 decisions.
	_, err = simulateFleet(cfg, o, time.Hour, 10*18-1)
	assert.Error(t, err)
	out, err := simulateFleet(cfg, o, time.Hour, 10*18)
	require.NoError(t, err)
	n, first, last := out.Back()
	assert.Equal(t, []any{10, 4 * time.Second, 4 * time.Second}, []any{n, first, last})
	assert.Equal(t, 7, out.Keys[0].Probes)
}
