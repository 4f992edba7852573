package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/internal/redistest"
	"github.com/stretchr/testify/require"
)

// Hand-written cases at the boundaries of the library's rules, with exact
// expected values. Every call goes to both sides through the conformance
// pairs, which compare them; the expectations here pin what both answer.

const us = time.Microsecond

func at(d time.Duration) time.Time { return t0.Add(d) }

func kinds(evs []crashloop.Event) []crashloop.EventKind {
	out := []crashloop.EventKind{}
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func TestBoundariesBudget(t *testing.T) {
	s := redistest.Start(t)
	cfg := crashloop.DefaultBudgetConfig() // 3 in 60s, 500ms .. 5s
	boom := errors.New("boom")

	t.Run("a respawn exactly Window old still counts", func(t *testing.T) {
		p := newBudgetPair(t, testKernel(t, s, false), cfg)
		p.rec.seen = map[crashloop.EventKind]int{}
		require.NoError(t, p.spawn("k"), "the first spawn is free")
		for i, want := range []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
			d, err := p.failed("k", boom, at(time.Duration(i)*10*time.Second))
			require.NoError(t, err)
			require.Equal(t, want, d)
		}
		_, err := p.failed("k", boom, at(60*time.Second)) // the first is exactly 60s old
		pe := asPark(err)
		require.NotNil(t, pe)
		require.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
		require.Equal(t, 3, pe.Attempts)
		require.True(t, pe.Since.Equal(at(60*time.Second)))
		require.Equal(t, "boom", pe.LastError.Error())
		require.Equal(t, 1, p.rec.seen[crashloop.EventStartupExhausted])

		// Parked: refused, nothing recorded, announced once.
		require.ErrorIs(t, p.spawn("k"), crashloop.ErrParked)
		_, err = p.failed("k", errors.New("again"), at(61*time.Second))
		require.Equal(t, "boom", asPark(err).LastError.Error(), "the park keeps the cause that parked it")
		require.Equal(t, 1, p.rec.seen[crashloop.EventStartupExhausted])
		require.Equal(t, 2, p.respawns("k", at(60*time.Second+us)), "the first aged out a microsecond later")

		require.NoError(t, p.resume("k", at(70*time.Second)))
		require.ErrorIs(t, p.resume("k", at(70*time.Second)), crashloop.ErrNotParked)
		require.Equal(t, 0, p.respawns("k", at(70*time.Second)), "a full budget")
		d, err := p.failed("k", boom, at(70*time.Second))
		require.NoError(t, err)
		require.Equal(t, 500*time.Millisecond, d)
	})

	t.Run("a respawn a microsecond older than Window does not count", func(t *testing.T) {
		p := newBudgetPair(t, testKernel(t, s, false), cfg)
		for range 3 {
			_, err := p.failed("k", boom, at(0))
			require.NoError(t, err)
		}
		d, err := p.failed("k", boom, at(60*time.Second+us))
		require.NoError(t, err)
		require.Equal(t, 500*time.Millisecond, d, "all three aged out: the first respawn of a new window")
	})

	t.Run("time never runs backwards for a key", func(t *testing.T) {
		p := newBudgetPair(t, testKernel(t, s, false), cfg)
		_, err := p.failed("k", boom, at(100*time.Second))
		require.NoError(t, err)
		d, err := p.failed("k", boom, at(0)) // read as 100s
		require.NoError(t, err)
		require.Equal(t, time.Second, d)
		require.Equal(t, 2, p.respawns("k", at(160*time.Second)), "both at 100s, exactly 60s old")
		require.Equal(t, 0, p.respawns("k", at(160*time.Second+us)))
		require.Equal(t, 0, p.respawns("k", at(50*time.Second)), "read as 160s+1µs")
	})

	t.Run("MaxRespawns 0 parks on the first failure", func(t *testing.T) {
		c := cfg
		c.MaxRespawns = 0
		p := newBudgetPair(t, testKernel(t, s, false), c)
		_, err := p.failed("k", nil, at(0))
		require.Equal(t, 0, asPark(err).Attempts)
		require.NoError(t, asPark(err).LastError)
	})

	t.Run("Forget drops a park without an event", func(t *testing.T) {
		c := cfg
		c.MaxRespawns = 0
		p := newBudgetPair(t, testKernel(t, s, false), c)
		_, err := p.failed("k", nil, at(0))
		require.Error(t, err)
		p.forget("k")
		require.Empty(t, p.rec.last)
		require.NoError(t, p.spawn("k"))
	})
}

func TestBoundariesChain(t *testing.T) {
	s := redistest.Start(t)
	cfg := crashloop.DefaultChainConfig() // 3 within 20m
	gap := cfg.ResetGap

	t.Run("a gap of exactly ResetGap keeps the chain", func(t *testing.T) {
		p := newChainPair(t, testKernel(t, s, false), cfg)
		p.rec.seen = map[crashloop.EventKind]int{}
		for i := 1; i <= 3; i++ {
			n, err := p.rescue("seat", "i1", true, at(time.Duration(i-1)*gap))
			require.NoError(t, err)
			require.Equal(t, i, n)
		}
		n, err := p.rescue("seat", "i1", true, at(3*gap))
		require.ErrorIs(t, err, crashloop.ErrNeedsHuman)
		require.Equal(t, 3, n)
		require.Equal(t, 1, p.rec.seen[crashloop.EventChainEscalated])
		_, err = p.rescue("seat", "i1", false, at(3*gap+time.Hour))
		require.ErrorIs(t, err, crashloop.ErrNeedsHuman, "refused until Clear, even after a long gap")
		require.Equal(t, 1, p.rec.seen[crashloop.EventChainEscalated], "announced once")
		p.clear("seat")
		n, err = p.rescue("seat", "i1", true, at(3*gap+time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})

	t.Run("a gap a microsecond longer breaks it", func(t *testing.T) {
		p := newChainPair(t, testKernel(t, s, false), cfg)
		_, _ = p.rescue("seat", "i1", true, at(0))
		n, err := p.rescue("seat", "i1", true, at(gap+us))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 1, p.chain("seat", "i1", at(2*gap+us)))
		require.Equal(t, 0, p.chain("seat", "i1", at(2*gap+2*us)))
	})

	t.Run("a planned rescue or another incarnation ends the chain", func(t *testing.T) {
		p := newChainPair(t, testKernel(t, s, false), cfg)
		_, _ = p.rescue("seat", "i1", true, at(0))
		_, _ = p.rescue("seat", "i1", true, at(time.Minute))
		n, _ := p.rescue("seat", "i1", false, at(2*time.Minute))
		require.Equal(t, 0, n)
		n, _ = p.rescue("seat", "i1", true, at(3*time.Minute))
		require.Equal(t, 1, n)
		n, _ = p.rescue("seat", "i2", true, at(4*time.Minute))
		require.Equal(t, 1, n)
		require.Equal(t, 0, p.chain("seat", "i1", at(4*time.Minute)))
	})

	t.Run("time never runs backwards for a key", func(t *testing.T) {
		p := newChainPair(t, testKernel(t, s, false), cfg)
		_, _ = p.rescue("seat", "i1", true, at(time.Hour))
		n, _ := p.rescue("seat", "i1", true, at(0)) // read as 1h: a gap of 0
		require.Equal(t, 2, n)
		require.Equal(t, 2, p.chain("seat", "i1", at(time.Hour+gap)))
	})
}

func TestBoundariesGuard(t *testing.T) {
	s := redistest.Start(t)
	p := newGuardPair(t, testKernel(t, s, false), crashloop.DefaultGuardConfig()) // 3 in 60s
	p.rec.seen = map[crashloop.EventKind]int{}
	require.False(t, p.record(at(0)))
	require.False(t, p.record(at(time.Second)))
	require.True(t, p.record(at(60*time.Second)), "the first is exactly 60s old: 3 in the window")
	require.Equal(t, []crashloop.EventKind{crashloop.EventGuardTripped}, kinds(p.rec.last))
	require.Equal(t, 3, p.rec.last[0].Attempts)
	require.Equal(t, "crash-loop breaker tripped (>= 3 restarts in 60s)", p.rec.last[0].Reason)
	require.True(t, p.record(at(60*time.Second)), "still 3 in the window just before: no transition")
	require.Equal(t, []crashloop.EventKind{}, kinds(p.rec.last))
	require.Equal(t, 3, p.view(at(61*time.Second)), "1s, 60s, 60s: the window keeps at most 3")
	require.Equal(t, 2, p.view(at(61*time.Second+us)))
	require.True(t, p.record(at(61*time.Second+us)), "2 before it, 3 with it: a new transition")
	require.Equal(t, []crashloop.EventKind{crashloop.EventGuardTripped}, kinds(p.rec.last))
	require.Equal(t, 2, p.rec.seen[crashloop.EventGuardTripped])
	p.reset()
	require.Equal(t, 0, p.view(at(61*time.Second+us)))
	require.False(t, p.record(at(0)), "read as the latest time, 61s+1µs")
	require.Equal(t, 1, p.view(at(121*time.Second+us)))
	require.Equal(t, 0, p.view(at(121*time.Second+2*us)))
}

func TestBoundariesFleet(t *testing.T) {
	s := redistest.Start(t)
	cfg := crashloop.FleetConfig{RestartsPerHour: 3, FailingFraction: 0.5, MinFailing: 2, Cooldown: 120 * time.Second}

	t.Run("rate trip, hold, re-arm exactly at trip + cooldown with the hour cleared", func(t *testing.T) {
		p := newFleetPair(t, testKernel(t, s, false), cfg)
		require.False(t, p.restart(at(0)))
		require.False(t, p.restart(at(time.Second)))
		require.True(t, p.restart(at(2*time.Second)))
		require.Equal(t, []crashloop.EventKind{crashloop.EventFleetTripped}, kinds(p.rec.last))
		require.Equal(t, 3, p.rec.last[0].Attempts)
		require.Equal(t, "channel crash-loop", p.rec.last[0].Reason)
		require.True(t, p.restart(at(3*time.Second)), "held: not recorded")
		require.Equal(t, []crashloop.EventKind{}, kinds(p.rec.last))
		st := p.status(at(3 * time.Second))
		require.True(t, st.BreakerTripped)
		require.Equal(t, 3, st.RestartsInHour)
		require.True(t, st.RearmAt.Equal(at(122*time.Second)))
		require.True(t, p.tripped(at(122*time.Second-us)))
		require.False(t, p.tripped(at(122*time.Second)), "re-armed exactly at trip + cooldown")
		require.Equal(t, []crashloop.EventKind{crashloop.EventFleetRearmed}, kinds(p.rec.last))
		st = p.status(at(122 * time.Second))
		require.Equal(t, 0, st.RestartsInHour, "the hour was cleared")
		require.Nil(t, st.RearmAt)
	})

	t.Run("fraction trip, extension, clamping", func(t *testing.T) {
		p := newFleetPair(t, testKernel(t, s, false), cfg)
		p.rec.seen = map[crashloop.EventKind]int{}
		require.False(t, p.state(1, 1, at(0)), "one failing member never trips on the fraction (MinFailing 2)")
		require.False(t, p.state(2, 5, at(0)), "2/5 < 0.5")
		require.True(t, p.state(2, 4, at(time.Second)), "2/4 >= 0.5")
		require.Equal(t, 1, p.rec.seen[crashloop.EventFleetTripped])
		require.Equal(t, "channel crash-loop: 2/4 channels failing", p.rec.last[0].Reason)
		require.True(t, p.state(3, 4, at(100*time.Second)), "extends the hold to 100s + 120s")
		require.Equal(t, 1, p.rec.seen[crashloop.EventFleetTripped], "an extension is no new trip")
		require.True(t, p.tripped(at(219*time.Second+999999*us)))
		require.False(t, p.state(9, -3, at(220*time.Second)), "re-armed; counts clamped to 0/0")
		require.Equal(t, 1, p.rec.seen[crashloop.EventFleetRearmed])
		st := p.status(at(220 * time.Second))
		require.Equal(t, 0, st.FailingChannels)
		require.Equal(t, 0, st.TotalChannels)
	})

	t.Run("a rate of 1 trips again on the first restart after the re-arm", func(t *testing.T) {
		c := cfg
		c.RestartsPerHour, c.Cooldown = 1, 0
		p := newFleetPair(t, testKernel(t, s, false), c)
		require.True(t, p.restart(at(0)))
		require.Equal(t, []crashloop.EventKind{crashloop.EventFleetTripped}, kinds(p.rec.last))
		require.True(t, p.restart(at(0)), "cooldown 0: re-armed at once, and tripped again")
		require.Equal(t, []crashloop.EventKind{crashloop.EventFleetRearmed, crashloop.EventFleetTripped}, kinds(p.rec.last))
	})

	t.Run("time never runs backwards for the fleet", func(t *testing.T) {
		p := newFleetPair(t, testKernel(t, s, false), cfg)
		require.True(t, p.state(2, 2, at(time.Hour)))
		require.True(t, p.tripped(at(0)), "read as 1h")
		require.False(t, p.tripped(at(time.Hour+120*time.Second)))
	})
}
