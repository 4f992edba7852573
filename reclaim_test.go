package crashloop

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// coreKeys returns the keys of k, read under its lock.
func coreKeys[E any](k *keyed[E]) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys := make([]string, 0, len(k.m))
	k.each(func(key string, _ *E) { keys = append(keys, key) })
	return keys
}

// coreDriveSweeps makes enough calls on k that every entry is looked at
// once: each call looks at one. call is made with throwaway keys (and must
// leave no entry behind).
func coreDriveSweeps[E any](k *keyed[E], call func(key string)) {
	k.mu.Lock()
	n := 4*len(k.m) + 4 // two walks; each probe adds a node, and removes it
	k.mu.Unlock()
	for j := 0; j < n; j++ {
		call(fmt.Sprintf("probe-%d", j))
	}
}

// Idle keys (not parked, no respawn in the window) are reclaimed by later
// calls; parked keys and keys with a respawn in the window are kept.
func TestBudgetReclaimsIdleKeys(t *testing.T) {
	m := coreMock()
	b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(m))
	require.NoError(t, err)

	// Enough keys that the map grows well past the rebuild threshold.
	const idle = 25 * shrinkLeast
	for i := 0; i < idle; i++ {
		_, err := b.Failed(fmt.Sprintf("idle-%d", i), errors.New("boom"))
		require.NoError(t, err)
	}
	parked := []string{"parked-a", "parked-b", "parked-c"}
	for _, key := range parked {
		for i := 0; i < 4; i++ {
			_, err = b.Failed(key, errors.New("boom"))
		}
		require.ErrorIs(t, err, ErrParked)
	}
	require.Len(t, coreKeys(&b.keys), idle+len(parked))

	// Half a window later a few keys fail; a window and a nanosecond after
	// the first failures, those are the only respawns left in any window.
	m.Add(30 * time.Second)
	fresh := []string{"fresh-a", "fresh-b"}
	for _, key := range fresh {
		_, err := b.Failed(key, errors.New("boom"))
		require.NoError(t, err)
	}
	m.Set(coreT0.Add(time.Minute + time.Nanosecond))

	coreDriveSweeps(&b.keys, func(key string) {
		_, err := b.Failed(key, errors.New("boom"))
		require.NoError(t, err)
		b.Forget(key)
	})

	// Only parked keys and keys with a respawn in the window remain, with
	// idle ones up to the floor below which a table reclaims nothing.
	left := coreKeys(&b.keys)
	assert.Subset(t, left, append(append([]string{}, parked...), fresh...))
	assert.Len(t, left, reclaimFloor-1, "the last probe took the table to the floor, then was forgotten")
	assert.Equal(t, parked, b.Parked())
	for _, key := range fresh {
		assert.Equal(t, 1, b.Respawns(key))
	}

	// The map that shrank was made anew: its peak is far below the
	// thousands of idle keys it held, so it no longer holds their buckets.
	b.keys.mu.Lock()
	assert.Less(t, b.keys.peak, idle/4)
	assert.Len(t, b.keys.order, len(b.keys.m))
	for i, n := range b.keys.order {
		assert.Equal(t, i, n.at, "each node at its index")
	}
	b.keys.mu.Unlock()

	// A reclaimed key is simply new again: a full budget.
	d, err := b.Failed("idle-7", errors.New("boom"))
	require.NoError(t, err)
	assert.Equal(t, 500*time.Millisecond, d)
}

// A chain detector reclaims keys whose chain has ended, and keeps marked
// keys and live chains.
func TestChainReclaimsEndedChains(t *testing.T) {
	m := coreMock()
	d, err := NewChainDetector(ChainConfig{MaxChain: 1, ResetGap: time.Minute}, WithClock(m))
	require.NoError(t, err)

	const ended = 2000
	for i := 0; i < ended; i++ {
		_, err := d.Rescue(fmt.Sprintf("ended-%d", i), "i", true)
		require.NoError(t, err)
	}
	_, err = d.Rescue("planned", "i", false)
	require.NoError(t, err)
	for _, key := range []string{"marked-a", "marked-b"} {
		_, err = d.Rescue(key, "i", true)
		require.NoError(t, err)
		_, err = d.Rescue(key, "i", true)
		require.ErrorIs(t, err, ErrNeedsHuman)
	}
	m.Add(30 * time.Second)
	_, err = d.Rescue("live", "i", true)
	require.NoError(t, err)
	m.Set(coreT0.Add(time.Minute + time.Nanosecond))

	coreDriveSweeps(&d.keys, func(key string) {
		_, err := d.Rescue(key, "i", false)
		require.NoError(t, err)
		d.Clear(key)
	})

	left := coreKeys(&d.keys)
	assert.Subset(t, left, []string{"marked-a", "marked-b", "live"})
	assert.Len(t, left, reclaimFloor-1, "the last probe took the table to the floor, then was cleared")
	assert.Equal(t, []string{"marked-a", "marked-b"}, d.NeedsHuman())
	assert.Equal(t, 1, d.Chain("live", "i"))
}
