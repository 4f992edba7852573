package crashloop

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// coreEntries returns the number of entries of each shard of k, and their
// sum, reading each shard under its lock.
func coreEntries[E any](k *keyed[E]) (perShard [shardCount]int, total int) {
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		perShard[i] = s.tab.len()
		s.mu.Unlock()
		total += perShard[i]
	}
	return perShard, total
}

// coreKeys returns the keys of k, reading each shard under its lock.
func coreKeys[E any](k *keyed[E]) []string {
	var keys []string
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		s.each(func(key string, _ *E) { keys = append(keys, key) })
		s.mu.Unlock()
	}
	return keys
}

// coreDriveSweeps makes enough calls on every shard of k that each shard is
// swept at least once: call is made with throwaway keys of the right shard
// (and must leave no entry behind).
func coreDriveSweeps[E any](t *testing.T, k *keyed[E], call func(key string)) {
	t.Helper()
	perShard, _ := coreEntries(k)
	var need [shardCount]int
	for i, n := range perShard {
		// A shard is swept once its call count reaches max(sweepEvery,
		// entries); the counter may stand anywhere below that.
		need[i] = max(n+1, sweepEvery) + 1
	}
	left := shardCount
	for j := 0; left > 0; j++ {
		require.Less(t, j, 10_000_000, "could not reach every shard")
		key := fmt.Sprintf("probe-%d", j)
		i, _ := place(k.hash, key)
		if need[i] == 0 {
			continue
		}
		call(key)
		need[i]--
		if need[i] == 0 {
			left--
		}
	}
}

// Idle keys (not parked, no respawn in the window) are reclaimed by later
// calls; parked keys and keys with a respawn in the window are kept.
func TestBudgetReclaimsIdleKeys(t *testing.T) {
	m := coreMock()
	b, err := NewRespawnBudget(DefaultBudgetConfig(), WithClock(m))
	require.NoError(t, err)

	// Enough keys that every shard's map grows past the rebuild threshold.
	const idle = shardCount * 5 * sweepEvery
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
	_, total := coreEntries(&b.keys)
	require.Equal(t, idle+len(parked), total)

	// Half a window later a few keys fail; a window and a nanosecond after
	// the first failures, those are the only respawns left in any window.
	m.Add(30 * time.Second)
	fresh := []string{"fresh-a", "fresh-b"}
	for _, key := range fresh {
		_, err := b.Failed(key, errors.New("boom"))
		require.NoError(t, err)
	}
	m.Set(coreT0.Add(time.Minute + time.Nanosecond))

	coreDriveSweeps(t, &b.keys, func(key string) {
		_, err := b.Failed(key, errors.New("boom"))
		require.NoError(t, err)
		b.Forget(key)
	})

	_, total = coreEntries(&b.keys)
	assert.Equal(t, len(parked)+len(fresh), total, "only parked keys and keys with a respawn in the window remain")
	assert.ElementsMatch(t, append(append([]string{}, parked...), fresh...), coreKeys(&b.keys))
	assert.Equal(t, parked, b.Parked())
	for _, key := range fresh {
		assert.Equal(t, 1, b.Respawns(key))
	}

	// Shrunken tables were rebuilt: they no longer hold slots for the
	// thousands of idle keys.
	for i := range b.keys.shards {
		s := &b.keys.shards[i]
		s.mu.Lock()
		assert.LessOrEqual(t, len(s.tab.slots), minSlots, "shard %d", i)
		s.mu.Unlock()
	}

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

	coreDriveSweeps(t, &d.keys, func(key string) {
		_, err := d.Rescue(key, "i", false)
		require.NoError(t, err)
		d.Clear(key)
	})

	assert.ElementsMatch(t, []string{"marked-a", "marked-b", "live"}, coreKeys(&d.keys))
	assert.Equal(t, []string{"marked-a", "marked-b"}, d.NeedsHuman())
	assert.Equal(t, 1, d.Chain("live", "i"))
}
