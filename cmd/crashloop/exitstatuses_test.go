//go:build unix

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExitStatusesAreDocumented: the table of docs/cli.md's "Exit
// statuses" section is exitStatuses, row for row and word for word, so
// that the reference cannot drift from what --help prints and the code
// uses. On a failure, the expected table is shown: paste it into the doc.
func TestExitStatusesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## Exit statuses\n")
	require.True(t, ok, `docs/cli.md has no "## Exit statuses" section`)
	section, _, _ = strings.Cut(section, "\n## ")
	var table []string
	for line := range strings.Lines(section) {
		if strings.HasPrefix(line, "|") {
			table = append(table, line)
		} else if len(table) > 0 {
			break
		}
	}
	want := []string{"| status | when |\n", "|---|---|\n"}
	for _, st := range exitStatuses {
		want = append(want, fmt.Sprintf("| %s | %s |\n", exitStatusName(st.code), st.when))
	}
	assert.Equal(t, strings.Join(want, ""), strings.Join(table, ""))
}

// TestExitStatusesInHelp: --help lists exitStatuses in a column, wrapped,
// without Markdown's backticks; a name too long for the column has a line
// of its own.
func TestExitStatusesInHelp(t *testing.T) {
	var b strings.Builder
	printExitStatuses(&b)
	assert.Equal(t, `Exit status:
  the program's
       the program ended supervision: it exited 0 (without --restart=always),
       an --on-exit stop rule matched its end, or crashloop was stopped by
       INT or TERM; 128+N when signal N killed it (143 for TERM, 137 for
       KILL)
  0    with --on-park wait, crashloop was stopped by INT or TERM while the
       program was parked (the park stays in --state or on Redis)
  1    an error of crashloop itself (a park it could not record in --state,
       a missing state file for status or resume, resume of a key that is not
       parked, an address it cannot bind…)
  2    bad usage, flags or configuration (an unknown command, an empty,
       padded or out-of-range value, a malformed config or state file,
       a missing --state folder)
  75   another crashloop supervises this --key with this --state
       (EX_TEMPFAIL: try again once it has ended)
  86   a guard gave up, or --state or --redis says the program is parked
  126  the program was found but cannot be executed (permission denied,
       a folder, a bad format)
  127  the program cannot be found
`, b.String())
}
