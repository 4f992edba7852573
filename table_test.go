package crashloop

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tableKeys returns the keys of t, checking on the way that the counts hold.
func tableKeys(t *testing.T, tab *table[int]) map[string]int {
	t.Helper()
	got := map[string]int{}
	used := 0
	for _, s := range tab.slots {
		if s.hash != slotEmpty {
			used++
		}
		if s.n != nil {
			require.NotContains(t, got, s.n.key, "a key held twice")
			got[s.n.key] = s.n.val
		}
	}
	require.Equal(t, tab.live, len(got), "live")
	require.Equal(t, tab.used, used, "used")
	if tab.slots != nil {
		require.Less(t, tab.used, len(tab.slots), "a table needs an empty slot to end its probes")
	}
	return got
}

// The table against a Go map under random adds, lookups and removes, with a
// hash that makes keys collide often (8 distinct hashes) and with the real
// one, and with removals during a scan as sweep does them.
func TestTableMatchesAMap(t *testing.T) {
	real := newHasher()
	for _, tc := range []struct {
		name string
		hash func(string) uint64
	}{
		{"colliding", func(k string) uint64 { return slotHash(real.hash(k) & 7) }},
		{"real", func(k string) uint64 { return slotHash(real.hash(k)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			var tab table[int]
			want := map[string]int{}
			for step := range 20000 {
				key := fmt.Sprintf("k%d", rng.IntN(300))
				h := tc.hash(key)
				switch op := rng.IntN(10); {
				case op < 5:
					n := tab.find(h, key)
					if n == nil {
						n = tab.add(h, key)
					}
					n.val = step
					want[key] = step
				case op < 8:
					tab.remove(h, key)
					delete(want, key)
				case op < 9:
					n := tab.find(h, key)
					v, ok := want[key]
					require.Equal(t, ok, n != nil, "find(%q)", key)
					if ok {
						require.Equal(t, v, n.val)
					}
				default: // a sweep: drop every odd value while scanning
					for i := range tab.slots {
						if n := tab.slots[i].n; n != nil && n.val%2 == 1 {
							delete(want, n.key)
							tab.removeAt(i)
						}
					}
					tab.shrink()
				}
				if step%997 == 0 {
					require.Equal(t, want, tableKeys(t, &tab), "step %d", step)
				}
			}
			require.Equal(t, want, tableKeys(t, &tab))
		})
	}
}

// A table grows at three quarters full, shrinks at an eighth, and gives
// back all its memory when emptied by a sweep.
func TestTableGrowsAndShrinks(t *testing.T) {
	hs := newHasher()
	var tab table[int]
	assert.Nil(t, tab.find(1234, "absent"), "the zero table is empty")
	for i := range 1000 {
		key := fmt.Sprint(i)
		tab.add(slotHash(hs.hash(key)), key)
	}
	assert.Equal(t, 1000, tab.len())
	assert.Equal(t, 2048, len(tab.slots), "1000 keys fit in 2048 slots at under 3/4")
	for i := range tab.slots {
		if n := tab.slots[i].n; n != nil && n.key != "7" {
			tab.removeAt(i)
		}
	}
	tab.shrink()
	assert.Equal(t, 1, tab.len())
	assert.Equal(t, minSlots, len(tab.slots))
	assert.NotNil(t, tab.find(slotHash(hs.hash("7")), "7"))
	tab.remove(slotHash(hs.hash("7")), "7")
	tab.shrink()
	assert.Nil(t, tab.slots, "an empty table holds no slots")
	assert.Zero(t, tab.used)
}

// slotHash never returns one of the two marks.
func TestSlotHashAvoidsTheMarks(t *testing.T) {
	assert.Equal(t, uint64(2), slotHash(0))
	assert.Equal(t, uint64(3), slotHash(1))
	assert.Equal(t, uint64(2), slotHash(2))
	assert.Equal(t, ^uint64(0), slotHash(^uint64(0)))
}

// The hash spreads keys that differ in one character, at any position and
// for every length the hash reads differently, evenly over the shards and
// the low bits that pick slots, and every byte of a key counts.
func TestHashSpreadsKeys(t *testing.T) {
	hs := newHasher()
	for _, format := range []string{"%d", "s-%04d", "session-%07d", "tenant/%08d/channel/slack", "%06d/a-much-longer-tail-that-is-the-same-for-every-key-of-the-fleet"} {
		const n = 64 * 1024
		var shards [shardCount]int
		var low [256]int
		seen := map[uint64]bool{}
		for i := range n {
			h := hs.hash(fmt.Sprintf(format, i))
			seen[h] = true
			shards[h>>shardShift]++
			low[h&255]++
		}
		assert.Len(t, seen, n, "%s: distinct keys collide", format)
		for i, c := range shards { // 256 expected; 6 sigma is about 96
			assert.InDelta(t, n/shardCount, c, 100, "%s: shard %d", format, i)
		}
		for i, c := range low { // 256 expected; 6 sigma is about 96
			assert.InDelta(t, n/256, c, 100, "%s: low byte %d", format, i)
		}
	}
	base := "0123456789abcdefghijklmnopqrstuvwxyz0123456789"
	for l := 0; l <= len(base); l++ {
		key := base[:l]
		h := hs.hash(key)
		for i := range l {
			flipped := key[:i] + string(key[i]^1) + key[i+1:]
			assert.NotEqual(t, h, hs.hash(flipped), "length %d: byte %d does not count", l, i)
		}
	}
	other := newHasher()
	assert.NotEqual(t, hs.hash("session-0001"), other.hash("session-0001"), "two tables hash alike")
}
