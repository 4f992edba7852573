package bench_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/crashloopguard/crashloop"
)

// nKeys is the number of keys of the keyed benchmarks.
const nKeys = 1000

var keys = func() []string {
	ks := make([]string, nKeys)
	for i := range ks {
		ks[i] = fmt.Sprintf("session-%04d", i)
	}
	return ks
}()

var errBench = errors.New("bench: exit status 1")

// budgetConfig is the budget of the root package's benchmarks: 100
// respawns a minute. A key that fails every budgetGap never parks, and
// each failure drops one respawn from a full window (budgetFull respawns)
// and records one.
func budgetConfig() crashloop.BudgetConfig {
	return crashloop.BudgetConfig{MaxRespawns: 100, Window: time.Minute, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
}

const (
	budgetGap  = 610 * time.Millisecond
	budgetFull = 99
)
