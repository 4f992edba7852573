package ledgertest_test

import (
	"testing"

	"github.com/crashloopguard/crashloop/share"
	"github.com/crashloopguard/crashloop/share/ledgertest"
)

// The reference conforms to itself: the checks run, and their scenarios
// are consistent.
func TestMemoryLedgerConforms(t *testing.T) {
	ledgertest.Conform(t, func(t *testing.T, n int) []share.Ledger {
		first := share.NewMemoryLedger()
		out := []share.Ledger{first}
		for range n - 1 {
			out = append(out, first.Replica())
		}
		return out
	})
}
