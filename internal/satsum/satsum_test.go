package satsum

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLinearSum(t *testing.T) {
	ms := time.Millisecond
	const maxDur = time.Duration(math.MaxInt64)
	for _, tc := range []struct {
		initial, max time.Duration
		n            int
		want         uint64
	}{
		{500 * ms, 5 * time.Second, 0, 0},
		{500 * ms, 5 * time.Second, 1, 500000000},
		{500 * ms, 5 * time.Second, 3, 3000000000},
		{500 * ms, 5 * time.Second, 10, 27500000000},
		{500 * ms, 5 * time.Second, 20, 77500000000},
		{0, 5 * time.Second, 1000, 0},
		{time.Second, time.Second, 5, 5000000000},
		{maxDur, maxDur, 1, math.MaxInt64},
		{1 << 62, 1 << 62, 2, math.MaxInt64 + 1},
		{maxDur, maxDur, 2, math.MaxUint64 - 1}, // the largest sum of two
		{maxDur, maxDur, 3, math.MaxUint64},     // saturated
		// 1ns, 2ns ... 6074000999ns: n(n+1)/2 = 18446744070963499500, the
		// largest triangle below MaxUint64; one more step saturates.
		{1, maxDur, 6074000999, 18446744070963499500},
		{1, maxDur, 6074001000, math.MaxUint64},
		// k = MaxInt64 steps below the cap: k+1 must not wrap around.
		{1, maxDur, math.MaxInt, math.MaxUint64},
		// k odd and k+1 even, and the reverse: 1+2+3 and 1+2+3+4, then the cap.
		{1, 3, 5, 12},
		{1, 4, 5, 14},
	} {
		assert.Equal(t, tc.want, Linear(tc.initial, tc.max, tc.n), "%v %v %d", tc.initial, tc.max, tc.n)
	}
}

// Add and Mul are exact up to math.MaxUint64 and saturate there.
func TestSaturatingSums(t *testing.T) {
	assert.Equal(t, uint64(math.MaxUint64), Add(math.MaxUint64-1, 1))
	assert.Equal(t, uint64(math.MaxUint64), Add(math.MaxUint64-1, 2))
	assert.Equal(t, uint64(math.MaxUint64), Add(math.MaxUint64, math.MaxUint64))
	assert.Equal(t, uint64(math.MaxUint64-1), Add(math.MaxUint64-2, 1))
	assert.Equal(t, uint64(math.MaxUint64-1), Mul(math.MaxUint64/2, 2))
	assert.Equal(t, uint64(math.MaxUint64), Mul(1<<32, 1<<32))
	assert.Equal(t, uint64(1<<63), Mul(1<<32, 1<<31))
	assert.Equal(t, uint64(0), Mul(0, math.MaxUint64))
}
