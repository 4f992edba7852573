//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStateFileKeepsAParkAcrossRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	f := filepath.Join(dir, "starts")
	args := with("--state="+state, "--key=web", "--", "sh", "-c", "echo x >> "+f+"; exit 1")

	r := runCL(t, args...)
	require.Equal(t, exitParked, r.code, r.stderr)
	require.Len(t, lines(t, f), 4)
	assert.Contains(t, r.stderr, "\ncrashloop: parked in "+state+"; once the cause is fixed, run: crashloop resume --state "+state+" web\n")

	// A new crashloop refuses to start the program and says how to resume.
	r = runCL(t, args...)
	assert.Equal(t, exitParked, r.code)
	assert.Len(t, lines(t, f), 4, "the program was not started again")
	assert.Equal(t, "crashloop: web is parked since "+markSince(t, state, "web")+" (respawn_budget_exhausted): sh exited with status 1\n"+
		"crashloop: once the cause is fixed, run: crashloop resume --state "+state+" web\n", r.stderr)

	// status --json prints the park, as every document of crashloop does.
	r = runCL(t, "status", "--state", state, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.JSONEq(t, `{"source": "state", "where": "`+state+`", "parks": [{"key": "web", "reason": "respawn_budget_exhausted",
		"since": "`+markTime(t, state, "web")+`", "attempts": 3, "last_error": "sh exited with status 1", "exit_code": 1}]}`, r.stdout)
	st, err := newStateStore(state).load(false)
	require.NoError(t, err)
	assert.Equal(t, 4, st.Marks["web"].Starts, "the file keeps this crashloop's starts too")
	require.NotNil(t, st.Marks["web"].ExitStatus)
	assert.Equal(t, 1, *st.Marks["web"].ExitStatus)

	// resume clears the mark; the next crashloop starts it with a full budget.
	r = runCL(t, "resume", "--state", state, "web")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "resumed web: "+resumedHow+"\n", r.stdout)
	r = runCL(t, args...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, f), 8)
}

// TestStatus shows each key's reason, since, starts and last error. It only
// reads: it creates no file (no lock file either), and works on a folder it
// cannot write to. A missing state file is an error that names it.
func TestStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	for _, key := range []string{"web", "api"} {
		r := runCL(t, with("--state="+state, "--key="+key, "--max-respawns=0", "--", helper, "exit=3")...)
		require.Equal(t, exitParked, r.code, r.stderr)
	}
	require.NoError(t, os.Remove(state+".lock"))
	before := listing(t, dir)

	// Read as a user who may not write to the folder: nobody, when the test
	// runs as root (root may write anywhere), else the test's own user on a
	// read-only folder.
	readOnly := func(args ...string) result {
		cmd := command(args...)
		if os.Geteuid() == 0 {
			require.NoError(t, os.Chmod(state, 0o644))
			require.NoError(t, os.Chmod(dir, 0o755))
			require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		} else {
			require.NoError(t, os.Chmod(dir, 0o555))
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
		}
		return runCmd(t, cmd)
	}
	r := readOnly("status", "--state", state)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.Equal(t, fmt.Sprintf(
		"KEY  REASON                    SINCE%s  ATTEMPTS  EXIT  LAST ERROR\n"+
			"api  respawn_budget_exhausted  %s  0         3     %s exited with status 3\n"+
			"web  respawn_budget_exhausted  %s  0         3     %s exited with status 3\n",
		pad("SINCE", markSince(t, state, "api")), markSince(t, state, "api"), helper, markSince(t, state, "web"), helper), r.stdout)
	assert.Equal(t, before, listing(t, dir), "status created no file")

	missing := filepath.Join(dir, "typo.json")
	r = readOnly("status", "--state", missing)
	assert.Equal(t, exitError, r.code)
	assert.Equal(t, "crashloop: state file "+missing+" does not exist\n", r.stderr)
	assert.Empty(t, r.stdout)
	assert.Equal(t, before, listing(t, dir), "status created no file")
}

// pad returns the spaces that widen the header word to the value's width.
func pad(header, value string) string {
	return fmt.Sprintf("%*s", len(value)-len(header), "")
}

func TestStatusOfNothingParked(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(state, []byte(`{"version": 1, "marks": {}}`), 0o644))
	r := runCL(t, "status", "--state", state)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "nothing is parked in "+state+"\n", r.stdout)
}

// TestResumeSaysWhatIsWrong: resume of a key that is not parked, of no key
// when several are, or on a missing file says so (exit 1) and changes
// nothing; with one key parked, the key may be left out.
func TestResumeSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	missing := filepath.Join(dir, "typo.json")
	r := runCL(t, "resume", "--state", missing, "web")
	assert.Equal(t, exitError, r.code)
	assert.Equal(t, "crashloop: state file "+missing+" does not exist\n", r.stderr)
	assert.NoFileExists(t, missing+".lock")

	for _, key := range []string{"a", "b"} {
		r := runCL(t, with("--state="+state, "--key="+key, "--max-respawns=0", "--", helper, "exit=1")...)
		require.Equal(t, exitParked, r.code, r.stderr)
	}
	for args, want := range map[string]string{
		"web": "crashloop: web is not parked in " + state + "; parked: a, b\n",
		"":    "crashloop: several keys are parked in " + state + ", name one: a, b\n",
	} {
		r := runCL(t, append([]string{"resume", "--state", state}, slices.DeleteFunc([]string{args}, func(s string) bool { return s == "" })...)...)
		assert.Equal(t, exitError, r.code)
		assert.Equal(t, want, r.stderr)
		assert.Empty(t, r.stdout)
	}
	r = runCL(t, "resume", "--state", state, "a")
	assert.Equal(t, 0, r.code, r.stderr)
	r = runCL(t, "resume", "--state", state)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "resumed b: "+resumedHow+"\n", r.stdout)
	r = runCL(t, "resume", "--state", state, "b")
	assert.Equal(t, exitError, r.code)
	assert.Equal(t, "crashloop: b is not parked: nothing is parked in "+state+"\n", r.stderr)
}

// TestOneSupervisorPerKey: a second crashloop with the same --key and
// --state refuses at once, with exit status 75 and the first one's pid;
// another key on the same file runs, and status still creates no file.
func TestOneSupervisorPerKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state, ready, starts := filepath.Join(dir, "state.json"), filepath.Join(dir, "ready"), filepath.Join(dir, "starts")
	first := startCL(t, with("--state="+state, "--key=k", "--", helper, "record="+starts, "touch="+ready, "hang")...)
	require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the first program to start")

	r := runCL(t, with("--state="+state, "--key=k", "--", helper, "record="+starts, "exit=0")...)
	assert.Equal(t, exitRunning, r.code)
	lock := state + ".k.lock"
	assert.Equal(t, "crashloop: k is already supervised with --state "+state+" by crashloop pid "+strconv.Itoa(first.cmd.Process.Pid)+" (it holds "+lock+")\n", r.stderr)
	assert.Len(t, lines(t, starts), 1, "the second did not start the program")

	r = runCL(t, with("--state="+state, "--key=other", "--", helper, "record="+starts, "exit=0")...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Len(t, lines(t, starts), 2)

	before := listing(t, dir)
	r = runCL(t, "status", "--state", state)
	assert.Equal(t, 0, r.code, "the state file exists from the start: "+r.stderr)
	assert.Equal(t, "nothing is parked in "+state+"\n", r.stdout)
	assert.Equal(t, before, listing(t, dir))

	first.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), first.wait(t))
	r = runCL(t, with("--state="+state, "--key=k", "--", helper, "record="+starts, "exit=0")...)
	assert.Equal(t, 0, r.code, "the lock ends with its crashloop: "+r.stderr)
}

func TestTwoCrashloopsShareOneStateFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	keys := []string{"a", "b", "c", "d"}
	var wg sync.WaitGroup
	codes := make([]int, len(keys))
	for i, k := range keys {
		wg.Go(func() {
			codes[i] = runCL(t, with("--state="+state, "--key="+k, "--max-respawns=0", "--", helper, "exit=1")...).code
		})
	}
	wg.Wait()
	assert.Equal(t, []int{exitParked, exitParked, exitParked, exitParked}, codes)
	r := runCL(t, "status", "--state", state, "--json")
	var st struct{ Parks []struct{ Key string } }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	var parked []string
	for _, p := range st.Parks {
		parked = append(parked, p.Key)
	}
	assert.Equal(t, keys, parked, "no crashloop lost another's mark")
}

// markSince returns the time a key was parked, as status prints it.
func markSince(t *testing.T, state, key string) string {
	t.Helper()
	data, err := os.ReadFile(state)
	require.NoError(t, err)
	var st stateFile
	require.NoError(t, json.Unmarshal(data, &st))
	require.Contains(t, st.Marks, key)
	return st.Marks[key].Since.Format(time.RFC3339)
}

// listing returns the names in dir.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// markTime returns the time of key's mark in state as crashloop's JSON
// documents write it.
func markTime(t *testing.T, state, key string) string {
	t.Helper()
	data, err := os.ReadFile(state)
	require.NoError(t, err)
	var st stateFile
	require.NoError(t, json.Unmarshal(data, &st))
	require.Contains(t, st.Marks, key)
	return st.Marks[key].Since.UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
}
