//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStderrTailBounds: the tail is the last lines whole, bounded by lines
// and bytes, whatever the writes' sizes; a cut character is dropped.
func TestStderrTailBounds(t *testing.T) {
	for _, tc := range []struct {
		name         string
		lines, bytes int
		writes       []string
		want         string
	}{
		{"nothing", 20, 4096, nil, ""},
		{"fewer lines", 3, 4096, []string{"a\nb\n"}, "a\nb\n"},
		{"the last lines", 2, 4096, []string{"a\nb\nc\n"}, "b\nc\n"},
		{"no newline at the end", 2, 4096, []string{"a\nb\nc"}, "b\nc"},
		{"split writes", 2, 4096, []string{"a\nb", "b\nc", "c\n"}, "bb\ncc\n"},
		{"the byte bound cuts the first line", 20, 6, []string{"abcdef\nxy\n"}, "ef\nxy\n"},
		{"a write larger than the ring", 20, 4, []string{"123456789"}, "6789"},
		{"wrapping writes", 20, 5, []string{"ab", "cd", "ef", "gh\n"}, "efgh\n"},
		{"a character cut by the bound", 20, 5, []string{"xé\nab\n"}, "\nab\n"},
		{"invalid UTF-8 replaced", 20, 4096, []string{"a\xffb\n"}, "a\uFFFDb\n"},
		{"blank lines count", 2, 4096, []string{"a\n\n\n"}, "\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tail := newStderrTail(tc.lines, tc.bytes)
			for _, w := range tc.writes {
				n, err := tail.Write([]byte(w))
				require.NoError(t, err)
				require.Equal(t, len(w), n)
			}
			assert.Equal(t, tc.want, tail.String())
		})
	}
}

// TestParkKeepsWhy: a park keeps the program's exit status and the last
// lines it wrote on stderr, which still pass through: in the log line of
// the park, the state file, status (its table and --json) and the refusal
// of the next start.
func TestParkKeepsWhy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	script := `for i in 1 2 3 4 5; do echo "line $i" >&2; done; echo "fatal: missing setting db_url" >&2; exit 3`
	args := with("--state="+state, "--key=web", "--max-respawns=0", "--stderr-tail-lines=3", "--", "sh", "-c", script)
	r := runCL(t, args...)
	require.Equal(t, exitParked, r.code, r.stderr)
	assert.Contains(t, r.stderr, "line 1\nline 2\nline 3\nline 4\nline 5\nfatal: missing setting db_url\n", "stderr passes through")
	assert.Contains(t, r.stderr, "crashloop: giving up on web: respawn_budget_exhausted after 1 start; last exit: exited with status 3; last on stderr: fatal: missing setting db_url\n")
	assert.Contains(t, r.stderr, `msg="key \"web\" parked (respawn_budget_exhausted, 0 respawns in 10s); it stays parked until an operator resumes it" event=agent.startup_exhausted key=web reason=respawn_budget_exhausted window=10s last_error="sh exited with status 3" exit_code=3 stderr_tail="line 4\nline 5\nfatal: missing setting db_url\n"`+"\n",
		"the park's event")

	data, err := os.ReadFile(state)
	require.NoError(t, err)
	var doc struct {
		Marks map[string]map[string]any `json:"marks"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	m := doc.Marks["web"]
	assert.Equal(t, float64(3), m["exit_status"], "the state file's format, as crashloops before the tail wrote it")
	assert.Equal(t, "line 4\nline 5\nfatal: missing setting db_url\n", m["stderr_tail"])
	assert.NotContains(t, m, "signal")

	r = runCL(t, "status", "--state", state, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.JSONEq(t, `{"source": "state", "where": "`+state+`", "parks": [{"key": "web", "reason": "respawn_budget_exhausted",
		"since": "`+markTime(t, state, "web")+`", "attempts": 0, "last_error": "sh exited with status 3", "exit_code": 3,
		"stderr_tail": "line 4\nline 5\nfatal: missing setting db_url\n"}]}`, r.stdout)
	r = runCL(t, "status", "--state", state)
	require.Equal(t, 0, r.code, r.stderr)
	since := markSince(t, state, "web")
	assert.Equal(t, fmt.Sprintf("KEY  REASON                    SINCE%s  ATTEMPTS  EXIT  LAST ERROR\n"+
		"web  respawn_budget_exhausted  %s  0         3     sh exited with status 3\n"+
		"\nweb, the last lines on stderr:\n  | line 4\n  | line 5\n  | fatal: missing setting db_url\n", pad("SINCE", since), since), r.stdout)

	r = runCL(t, args...)
	require.Equal(t, exitParked, r.code, r.stderr)
	assert.Equal(t, "crashloop: web is parked since "+since+" (respawn_budget_exhausted): sh exited with status 3; last on stderr: fatal: missing setting db_url\n"+
		"crashloop: once the cause is fixed, run: crashloop resume --state "+state+" web\n", r.stderr)
}

// TestParkKeepsTheSignal: a program killed by a signal is parked with the
// signal's name and no exit status.
func TestParkKeepsTheSignal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	r := runCL(t, with("--state="+state, "--key=k", "--max-respawns=0", "--", "sh", "-c", "kill -TERM $$")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	r = runCL(t, "status", "--state", state, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var doc struct{ Parks []map[string]any }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	require.Len(t, doc.Parks, 1, r.stdout)
	assert.Equal(t, map[string]any{"key": "k", "reason": "respawn_budget_exhausted", "since": doc.Parks[0]["since"], "attempts": 0.0,
		"last_error": "sh killed by signal TERM", "signal": "TERM"}, doc.Parks[0], "no exit_code, no stderr_tail")
	r = runCL(t, "status", "--state", state)
	assert.Contains(t, r.stdout, "  SIGTERM  sh killed by signal TERM\n")
}

// TestStderrTailOfAGigabyte: a program that writes 1 GB to stderr leaves
// crashloop's memory flat: its peak resident set grows by less than 16
// MiB over a program that writes a line, and the tail is the last lines.
func TestStderrTailOfAGigabyte(t *testing.T) {
	// Not parallel: a gigabyte through a pipe keeps a core busy for
	// seconds (more under -race), which would starve the timed tests.
	maxRSS := func(script string) (int64, string) {
		dir := t.TempDir()
		state := filepath.Join(dir, "state.json")
		cmd := command(with("--state="+state, "--key=big", "--max-respawns=0", "--", "sh", "-c", script)...)
		cmd.Stderr = nil // /dev/null: the test keeps none of the gigabyte
		err := cmd.Run()
		require.Error(t, err)
		require.Equal(t, exitParked, cmd.ProcessState.ExitCode())
		st, err := newStateStore(state).load(false)
		require.NoError(t, err)
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss, st.Marks["big"].StderrTail // KiB on Linux
	}
	small, tail := maxRSS(`echo "last words" >&2; exit 1`)
	assert.Equal(t, "last words\n", tail)
	// 200,000,000 lines of 5 bytes: 1e9 bytes
	big, tail := maxRSS(`yes line | head -c 1000000000 >&2; echo "last words" >&2; exit 1`)
	assert.Equal(t, strings.Repeat("line\n", 19)+"last words\n", tail)
	t.Logf("peak RSS: %d KiB with one line on stderr, %d KiB with 1 GB", small, big)
	assert.Less(t, big-small, int64(16<<10), "peak RSS grew by %d KiB", big-small)
}

// TestStderrTailFromTheConfigFile: --config's "stderr_tail" sets the
// bounds the flags do not, and the library never sees it.
func TestStderrTailFromTheConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"budget": {"max_respawns": 0}, "stderr_tail": {"lines": 2, "bytes": 14}}`), 0o644))
	script := `printf 'a\nbbbb\ncccc\ndddd\n' >&2; exit 1`
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{nil, "cccc\ndddd\n"}, // 2 lines
		{[]string{"--stderr-tail-lines=3"}, "bbb\ncccc\ndddd\n"}, // 14 bytes
		{[]string{"--stderr-tail-bytes=7"}, "c\ndddd\n"},
	} {
		state := filepath.Join(t.TempDir(), "state.json")
		args := append(append([]string{"--config=" + cfg, "--state=" + state, "--key=k"}, tc.flags...), "--", "sh", "-c", script)
		r := runCL(t, with(args...)...)
		require.Equal(t, exitParked, r.code, r.stderr)
		st, err := newStateStore(state).load(false)
		require.NoError(t, err)
		assert.Equal(t, tc.want, st.Marks["k"].StderrTail, "%v", tc.flags)
	}
}

// TestStatusEndpointShowsWhy: /status shows a key's last exit and stderr
// tail: of a park crashloop made while it waits (--on-park wait), and of a
// park it read from the state file at its start.
func TestStatusEndpointShowsWhy(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.json")
	args := with("--log-format=json", "--metrics-addr=127.0.0.1:0", "--on-park=wait", "--state="+state, "--key=web", "--max-respawns=0",
		"--", "sh", "-c", `echo "fatal: missing setting db_url" >&2; exit 3`)
	for _, when := range []string{"parked by this crashloop", "read from the state file"} {
		c := startCL(t, args...)
		addr := metricsAddr(t, c)
		waitingOn(t, c)
		var st struct {
			Keys []struct {
				Key   string         `json:"key"`
				State string         `json:"state"`
				Park  map[string]any `json:"park"`
			} `json:"keys"`
		}
		_, doc := get(t, http.MethodGet, "http://"+addr+"/status")
		require.NoError(t, json.Unmarshal([]byte(doc), &st), doc)
		require.Len(t, st.Keys, 1, doc)
		k := st.Keys[0]
		assert.Equal(t, "web", k.Key, when)
		assert.Equal(t, "parked", k.State, when)
		assert.Equal(t, map[string]any{"key": "web", "reason": "respawn_budget_exhausted", "since": k.Park["since"], "attempts": 0.0,
			"last_error": "sh exited with status 3", "exit_code": 3.0, "stderr_tail": "fatal: missing setting db_url\n"}, k.Park, when)
		c.signal(t, syscall.SIGTERM)
		assert.Equal(t, 0, c.wait(t), c.stderr.String())
	}
}
