// Package satsum adds up backoff waits in nanoseconds, saturated at
// math.MaxUint64: exact below it, for any number of waits.
package satsum

import (
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Text writes a sum of waits: as a duration when it is one, else
// in nanoseconds, "at least" the saturated math.MaxUint64.
func Text(sum uint64) string {
	switch {
	case sum <= math.MaxInt64:
		return time.Duration(sum).String()
	case sum == math.MaxUint64:
		return "at least " + strconv.FormatUint(sum, 10) + "ns"
	}
	return strconv.FormatUint(sum, 10) + "ns"
}

// Add returns a+b, or math.MaxUint64 when that overflows.
func Add(a, b uint64) uint64 {
	if s, carry := bits.Add64(a, b, 0); carry == 0 {
		return s
	}
	return math.MaxUint64
}

// Mul returns a*b, or math.MaxUint64 when that overflows.
func Mul(a, b uint64) uint64 {
	if hi, lo := bits.Mul64(a, b); hi == 0 {
		return lo
	}
	return math.MaxUint64
}

// Linear returns the sum of min(initial*i, ceiling) for i = 1..n, in
// nanoseconds, saturated at math.MaxUint64: exact below it, for any n.
// initial must not exceed ceiling.
func Linear(initial, ceiling time.Duration, n int) uint64 {
	if initial <= 0 || n <= 0 {
		return 0
	}
	k := uint64(min(ceiling/initial, time.Duration(n))) // steps below the cap
	// initial*k(k+1)/2 + ceiling*(n-k), halving whichever of k and k+1 is even
	a, b := k, k+1
	if a%2 == 0 {
		a /= 2
	} else {
		b /= 2
	}
	return Add(Mul(Mul(a, b), uint64(initial)), Mul(uint64(n)-k, uint64(ceiling)))
}
