package crashloop

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// coreRace runs f(0) ... f(n-1) on n goroutines released at once from a
// barrier, and waits for all of them.
func coreRace(n int, f func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// coreKindCounter counts events per kind with atomics.
type coreKindCounter struct {
	n [16]atomic.Int32
}

func (c *coreKindCounter) HandleEvent(ev Event) { c.n[ev.Kind].Add(1) }
func (c *coreKindCounter) get(k EventKind) int  { return int(c.n[k].Load()) }

const coreRaceRounds = 20

// Eight goroutines failing one key at once: three respawns, one park, one
// EventStartupExhausted, and every other caller refused with that park.
func TestConcurrentBudgetParksOnce(t *testing.T) {
	for round := 0; round < coreRaceRounds; round++ {
		m := coreMock()
		count, rec := &coreKindCounter{}, &coreRecorder{}
		b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(m), WithEventHandler(MultiHandler(count, rec)))
		require.NoError(t, err)

		causes := make([]error, 8)
		for i := range causes {
			causes[i] = fmt.Errorf("failure %d", i)
		}
		backoffs := make([]time.Duration, 8)
		errs := make([]error, 8)
		coreRace(8, func(i int) { backoffs[i], errs[i] = b.Failed("k", causes[i]) })

		var granted []time.Duration
		var parked []*ParkedError
		for i, err := range errs {
			if err == nil {
				granted = append(granted, backoffs[i])
				continue
			}
			require.ErrorIs(t, err, ErrParked)
			var pe *ParkedError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, time.Duration(0), backoffs[i])
			parked = append(parked, pe)
		}
		slices.Sort(granted)
		require.Equal(t, []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond}, granted, "round %d", round)
		require.Len(t, parked, 5)
		for _, pe := range parked[1:] {
			require.Same(t, parked[0], pe, "one park, shared by every refused caller")
		}
		assert.Equal(t, 3, parked[0].Attempts)
		assert.Contains(t, causes, parked[0].LastError)

		require.Equal(t, 1, count.get(EventStartupExhausted), "round %d", round)
		require.Equal(t, 3, count.get(EventRespawnScheduled), "round %d", round)
		parkEvents := rec.Filter(func(ev Event) bool { return ev.Kind == EventStartupExhausted })
		require.Len(t, parkEvents, 1)
		assert.Equal(t, Event{Kind: EventStartupExhausted, Key: "k", Time: coreT0, Reason: ReasonBudgetExhausted,
			LastError: parked[0].LastError, Attempts: 3, Limit: 3, Window: time.Minute}, parkEvents[0])
		assert.Equal(t, []string{"k"}, b.Parked())
	}
}

// Eight goroutines rescuing one incarnation at once: chains 1, 2, 3, then
// five refusals and one escalation.
func TestConcurrentChainEscalatesOnce(t *testing.T) {
	for round := 0; round < coreRaceRounds; round++ {
		count := &coreKindCounter{}
		d, err := NewChainDetector(DefaultChainConfig(), WithClock(coreMock()), WithEventHandler(count))
		require.NoError(t, err)

		chains := make([]int, 8)
		errs := make([]error, 8)
		coreRace(8, func(i int) { chains[i], errs[i] = d.Rescue("seat", "inc", true) })

		var ok []int
		refused := 0
		for i, err := range errs {
			if err == nil {
				ok = append(ok, chains[i])
				continue
			}
			require.ErrorIs(t, err, ErrNeedsHuman)
			assert.Equal(t, 3, chains[i])
			refused++
		}
		slices.Sort(ok)
		require.Equal(t, []int{1, 2, 3}, ok, "round %d", round)
		require.Equal(t, 5, refused)
		require.Equal(t, 1, count.get(EventChainEscalated), "round %d", round)
		assert.Equal(t, []string{"seat"}, d.NeedsHuman())
	}
}

// Eight restarts at once on a guard of 3: two below the limit, six tripped,
// one EventGuardTripped.
func TestConcurrentGuardTripsOnce(t *testing.T) {
	for round := 0; round < coreRaceRounds; round++ {
		count := &coreKindCounter{}
		g, err := NewRestartLoopGuard(3, time.Minute, WithClock(coreMock()), WithEventHandler(count))
		require.NoError(t, err)

		tripped := make([]bool, 8)
		coreRace(8, func(i int) { tripped[i] = g.Record() })

		n := 0
		for _, tr := range tripped {
			if tr {
				n++
			}
		}
		require.Equal(t, 6, n, "round %d", round)
		require.Equal(t, 1, count.get(EventGuardTripped), "round %d", round)
		assert.True(t, g.Tripped())
	}
}

// The fleet breaker trips once and re-arms once under concurrency.
func TestConcurrentFleetTripsAndRearmsOnce(t *testing.T) {
	for round := 0; round < coreRaceRounds; round++ {
		m := coreMock()
		count := &coreKindCounter{}
		cfg := DefaultFleetConfig()
		cfg.RestartsPerHour = 3
		p, err := NewFleetSupervisionPolicy(cfg, WithClock(m), WithEventHandler(count))
		require.NoError(t, err)

		tripped := make([]bool, 8)
		coreRace(8, func(i int) { tripped[i] = p.NoteRestart() })
		n := 0
		for _, tr := range tripped {
			if tr {
				n++
			}
		}
		require.Equal(t, 6, n, "round %d", round)
		require.Equal(t, 1, count.get(EventFleetTripped))
		require.Equal(t, 3, p.Status().RestartsInHour, "held restarts were not recorded")

		m.Add(cfg.Cooldown)
		coreRace(8, func(i int) {
			switch i % 4 {
			case 0:
				tripped[i] = p.Tripped()
			case 1:
				tripped[i] = p.Status().BreakerTripped
			case 2:
				tripped[i] = p.NoteFleetState(0, 4)
			case 3:
				tripped[i] = p.NoteRestart()
			}
		})
		require.Equal(t, make([]bool, 8), tripped, "round %d: re-armed for every caller", round)
		require.Equal(t, 1, count.get(EventFleetRearmed), "round %d", round)
		require.Equal(t, 2, p.Status().RestartsInHour, "the two NoteRestart calls after the re-arm")

		coreRace(8, func(i int) { tripped[i] = p.NoteFleetState(2, 4) })
		require.Equal(t, []bool{true, true, true, true, true, true, true, true}, tripped)
		require.Equal(t, 2, count.get(EventFleetTripped), "round %d", round)
	}
}

// Many keys, many goroutines, every public method: the race detector has
// its say, and each key's story comes out exact.
func TestConcurrentManyKeys(t *testing.T) {
	var mu sync.Mutex
	perKey := map[string][]EventKind{}
	h := EventHandlerFunc(func(ev Event) {
		mu.Lock()
		perKey[ev.Key] = append(perKey[ev.Key], ev.Kind)
		mu.Unlock()
	})
	b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(coreMock()), WithEventHandler(h))
	require.NoError(t, err)
	d, err := NewChainDetector(ChainConfig{MaxChain: 2, ResetGap: time.Minute}, WithClock(coreMock()), WithEventHandler(h))
	require.NoError(t, err)

	const workers, rounds = 8, 25
	// assert, not require: these run off the test goroutine.
	coreRace(workers+1, func(w int) {
		if w == workers { // an observer
			for i := 0; i < rounds*4; i++ {
				parked := b.Parked()
				assert.True(t, slices.IsSorted(parked))
				assert.True(t, slices.IsSorted(d.NeedsHuman()))
			}
			return
		}
		key := fmt.Sprintf("key-%d", w)
		for r := 0; r < rounds; r++ {
			assert.NoError(t, b.Spawn(key))
			for i := 0; i < 3; i++ {
				_, err := b.Failed(key, errors.New("boom"))
				assert.NoError(t, err)
			}
			_, err := b.Failed(key, errors.New("boom"))
			assert.ErrorIs(t, err, ErrParked)
			assert.True(t, b.IsParked(key))
			assert.NoError(t, b.Resume(key))

			_, err = d.Rescue(key, "inc", true)
			assert.NoError(t, err)
			_, err = d.Rescue(key, "inc", true)
			assert.NoError(t, err)
			_, err = d.Rescue(key, "inc", true)
			assert.ErrorIs(t, err, ErrNeedsHuman)
			d.Clear(key)
		}
	})

	assert.Empty(t, b.Parked())
	assert.Empty(t, d.NeedsHuman())
	want := []EventKind{}
	for r := 0; r < rounds; r++ {
		want = append(want, EventRespawnScheduled, EventRespawnScheduled, EventRespawnScheduled, EventStartupExhausted, EventResumed, EventChainEscalated, EventResumed)
	}
	require.Len(t, perKey, workers)
	for key, kinds := range perKey {
		assert.Equal(t, want, kinds, key)
	}
}
