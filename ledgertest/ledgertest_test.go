package ledgertest_test

import (
	"testing"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/ledgertest"
)

// The reference conforms to itself: the checks run, and their scenarios
// are consistent.
func TestMemoryLedgerConforms(t *testing.T) {
	ledgertest.Conform(t, func(t *testing.T, n int) []crashloop.Ledger {
		first := crashloop.NewMemoryLedger()
		out := []crashloop.Ledger{first}
		for range n - 1 {
			out = append(out, first.Replica())
		}
		return out
	})
}
