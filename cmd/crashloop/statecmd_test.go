//go:build unix

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResumeKey: resume without a KEY, on a state file or on Redis, clears
// the one parked key, and otherwise says that nothing, or which keys, are
// parked where.
func TestResumeKey(t *testing.T) {
	key, err := resumeKey([]string{"web"}, "state.json")
	require.NoError(t, err)
	assert.Equal(t, "web", key)

	key, err = resumeKey(nil, "redis://redis.internal:6379")
	assert.EqualError(t, err, "nothing is parked in redis://redis.internal:6379")
	assert.Empty(t, key)

	parked := []string{"worker", "api", "web"}
	key, err = resumeKey(parked, "state.json")
	assert.EqualError(t, err, "several keys are parked in state.json, name one: api, web, worker")
	assert.Empty(t, key)
	assert.Equal(t, []string{"worker", "api", "web"}, parked, "the caller's slice is left as it was")
}

// TestPrintParksQuotesWhatWouldBreakTheTable: status prints a park's
// stderr tail under the table, a line with a tab (a Go stack trace's) as it
// is, and one with another control character (a terminal's escape
// sequence, a carriage return) or invalid UTF-8 quoted, as it quotes such a
// key; a park without a known end shows "-" in EXIT.
func TestPrintParksQuotesWhatWouldBreakTheTable(t *testing.T) {
	since := jsonTime(time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC))
	code := 2
	var b strings.Builder
	require.NoError(t, printParks(&b, []parkDoc{
		{Key: "a\x1bb", Reason: "respawn_budget_exhausted", Since: since, Attempts: 3, LastError: "x exited with status 2", ExitCode: &code,
			StderrTail: "goroutine 1:\n\tmain.go:12\n\x1b[2Jcleared\nhalf\rdone\nbad \xff byte\n"},
		{Key: "web", Reason: "needs_human", Since: since, Attempts: 1, LastError: "gone", Signal: "KILL"},
		{Key: "old", Reason: "respawn_budget_exhausted", Since: since},
	}))
	assert.Equal(t, `KEY       REASON                    SINCE                 ATTEMPTS  EXIT     LAST ERROR
"a\x1bb"  respawn_budget_exhausted  2026-01-02T10:00:00Z  3         2        x exited with status 2
web       needs_human               2026-01-02T10:00:00Z  1         SIGKILL  gone
old       respawn_budget_exhausted  2026-01-02T10:00:00Z  0         -        
`+"\n"+`"a\x1bb", the last lines on stderr:
  | goroutine 1:
  | `+"\t"+`main.go:12
  | "\x1b[2Jcleared"
  | "half\rdone"
  | "bad \xff byte"
`, b.String())
}
