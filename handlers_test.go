package crashloop

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Handlers run after the change is committed and with no lock held: a
// handler may call back into the object that called it.

func TestReentrantBudgetHandler(t *testing.T) {
	var b *RespawnBudget
	var kinds []EventKind
	var inHandler struct {
		parked      bool
		parkedList  []string
		spawnErr    error
		resumeErr   error
		respawnsSaw []int
	}
	h := EventHandlerFunc(func(ev Event) {
		kinds = append(kinds, ev.Kind)
		switch ev.Kind {
		case EventRespawnScheduled:
			inHandler.respawnsSaw = append(inHandler.respawnsSaw, b.Respawns(ev.Key))
		case EventStartupExhausted:
			inHandler.parked = b.IsParked(ev.Key)
			inHandler.parkedList = b.Parked()
			inHandler.spawnErr = b.Spawn(ev.Key)
			inHandler.resumeErr = b.Resume(ev.Key) // the operator's auto-resume
		}
	})
	var err error
	b, err = NewRespawnBudget(DefaultBudgetConfig(), WithClock(coreMock()), WithEventHandler(h))
	require.NoError(t, err)

	coreNoDeadlock(t, func() {
		for i := 0; i < 3; i++ {
			_, err := b.Failed("s", errors.New("boom"))
			assert.NoError(t, err)
		}
		_, err := b.Failed("s", errors.New("boom"))
		assert.ErrorIs(t, err, ErrParked, "the caller still gets the park it caused")
	})
	assert.Equal(t, []int{1, 2, 3}, inHandler.respawnsSaw)
	assert.True(t, inHandler.parked, "the park is committed before the handler runs")
	assert.Equal(t, []string{"s"}, inHandler.parkedList)
	assert.ErrorIs(t, inHandler.spawnErr, ErrParked)
	assert.NoError(t, inHandler.resumeErr)
	assert.Equal(t, []EventKind{EventRespawnScheduled, EventRespawnScheduled, EventRespawnScheduled, EventStartupExhausted, EventResumed}, kinds)
	assert.False(t, b.IsParked("s"))
	d, err := b.Failed("s", errors.New("boom"))
	require.NoError(t, err)
	assert.Equal(t, 500*time.Millisecond, d)
}

func TestReentrantGuardHandler(t *testing.T) {
	var g *RestartLoopGuard
	var tripped, recorded bool
	var restarts, events int
	h := EventHandlerFunc(func(ev Event) {
		events++
		tripped = g.Tripped()
		restarts = g.Restarts()
		recorded = g.Record() // still tripped: no new transition, no recursion
	})
	var err error
	g, err = NewRestartLoopGuard(3, time.Minute, WithClock(coreMock()), WithEventHandler(h))
	require.NoError(t, err)

	coreNoDeadlock(t, func() {
		for i := 0; i < 3; i++ {
			g.Record()
		}
	})
	assert.Equal(t, 1, events)
	assert.True(t, tripped)
	assert.Equal(t, 3, restarts)
	assert.True(t, recorded)
}

func TestReentrantFleetHandler(t *testing.T) {
	m := coreMock()
	var p *FleetSupervisionPolicy
	var statuses []FleetStatus
	var trippedSeen []bool
	h := EventHandlerFunc(func(ev Event) {
		statuses = append(statuses, p.Status())
		trippedSeen = append(trippedSeen, p.Tripped())
	})
	var err error
	p, err = NewFleetSupervisionPolicy(DefaultFleetConfig(), WithClock(m), WithEventHandler(h))
	require.NoError(t, err)

	coreNoDeadlock(t, func() {
		assert.True(t, p.NoteFleetState(2, 4))
		m.Add(120 * time.Second)
		assert.False(t, p.Tripped())
	})
	rearm := coreT0.Add(120 * time.Second)
	assert.Equal(t, []FleetStatus{
		{BreakerTripped: true, FleetRestartsPerHour: 40, FailingKeys: 2, Keys: 4, RearmAt: &rearm},
		{BreakerTripped: false, FleetRestartsPerHour: 40, FailingKeys: 2, Keys: 4},
	}, statuses)
	assert.Equal(t, []bool{true, false}, trippedSeen)
}

func TestReentrantChainHandler(t *testing.T) {
	var d *ChainDetector
	var seen []string
	var marked bool
	h := EventHandlerFunc(func(ev Event) {
		if ev.Kind != EventChainEscalated {
			return
		}
		seen = d.NeedsHuman()
		marked = slices.Contains(d.NeedsHuman(), ev.Key)
		d.Clear(ev.Key) // a handler that hands the key to a human and forgets it
	})
	var err error
	d, err = NewChainDetector(ChainConfig{MaxChain: 1, ResetGap: time.Minute}, WithClock(coreMock()), WithEventHandler(h))
	require.NoError(t, err)

	coreNoDeadlock(t, func() {
		_, err := d.Rescue("seat", "i", true)
		assert.NoError(t, err)
		_, err = d.Rescue("seat", "i", true)
		assert.ErrorIs(t, err, ErrNeedsHuman)
	})
	assert.Equal(t, []string{"seat"}, seen)
	assert.True(t, marked)
	assert.Empty(t, d.NeedsHuman(), "cleared from inside the handler")
	n, err := d.Rescue("seat", "i", true)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}
