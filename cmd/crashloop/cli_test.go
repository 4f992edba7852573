//go:build unix

package main

import (
	"debug/buildinfo"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProgramThatCannotRun: a program that cannot be found exits 127, one
// that cannot be executed 126, at once, with one line and no restart (and
// no park mark in --state, which exists from the start).
func TestProgramThatCannotRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644))
	cases := []struct {
		program string
		code    int
		want    string
	}{
		{"crashloop-no-such-program", exitNotFound, "crashloop-no-such-program: command not found"},
		{"/nonexistent/program", exitNotFound, "/nonexistent/program: no such file or directory"},
		{plain, exitCannotExec, plain + ": permission denied"},
		{dir, exitCannotExec, dir + ": permission denied"},
	}
	for _, tc := range cases {
		state := filepath.Join(dir, "state.json")
		r := runCL(t, with("--state="+state, "--", tc.program, "arg")...)
		assert.Equal(t, tc.code, r.code, r.stderr)
		assert.Equal(t, "crashloop: "+tc.want+"\n", r.stderr)
		r = runCL(t, "status", "--state", state)
		assert.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, "nothing is parked in "+state+"\n", r.stdout, "no park mark")
	}
}

// TestProgramLookupUsesItsEnvironment: the program is looked up with the
// PATH of --env, and a relative path from --chdir, as a shell would after
// cd and export.
func TestProgramLookupUsesItsEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello"), []byte("#!/bin/sh\necho hello \"$1\"\n"), 0o755))
	r := runCL(t, with("--env=PATH="+dir+":/usr/bin:/bin", "--", "hello", "path")...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "hello path\n", r.stdout)
	r = runCL(t, with("--chdir="+dir, "--", "./hello", "chdir")...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "hello chdir\n", r.stdout)
}

// TestChdirAndEnv: the program runs in --chdir with --env added to the
// environment; a later --env of the same key wins.
func TestChdirAndEnv(t *testing.T) {
	t.Parallel()
	dir, work := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "env")
	cmd := command(with("--chdir="+work, "--env=FOO=bar", "--env=FOO=baz=qux", "--env=EMPTY=", "--", helper, "env="+file, "exit=0")...)
	cmd.Env = append(cmd.Env, "FOO=inherited", "KEPT=yes")
	r := runCmd(t, cmd)
	require.Equal(t, 0, r.code, r.stderr)
	env := envOf(t, file)
	assert.Equal(t, work, env["PWD"])
	assert.Equal(t, "baz=qux", env["FOO"])
	assert.Equal(t, "yes", env["KEPT"])
	assert.Contains(t, env, "EMPTY")
	assert.Equal(t, 1, strings.Count(strings.Join(lines(t, file), "\n"), "FOO="), "one FOO")
}

func TestVersion(t *testing.T) {
	t.Parallel()
	bi, err := buildinfo.ReadFile(binary)
	require.NoError(t, err)
	want := bi.Main.Version
	if want == "" {
		want = "(devel)"
	}
	r := runCL(t, "--version")
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "crashloop "+want+"\n", r.stdout)
	assert.Empty(t, r.stderr)
}

// TestHelp: --help lists every flag, the examples and every exit status.
func TestHelp(t *testing.T) {
	t.Parallel()
	r := runCL(t, "--help")
	assert.Equal(t, 0, r.code)
	assert.Empty(t, r.stderr)
	listed := map[string]bool{}
	for _, sec := range helpSections {
		for _, name := range sec.flags {
			listed[name] = true
			assert.True(t, strings.Contains(r.stdout, "\n  --"+name+" ") || strings.Contains(r.stdout, "\n  --"+name+"\n"), "--%s", name)
		}
	}
	newSettings().fs.VisitAll(func(f *flag.Flag) { assert.True(t, listed[f.Name], "--%s is missing from --help", f.Name) })
	for _, want := range []string{"Usage:\n", "Examples:\n", "crashloop status --state", "crashloop resume --state", "(default 10s)"} {
		assert.Contains(t, r.stdout, want)
	}
	var exits strings.Builder
	printExitStatuses(&exits)
	assert.True(t, strings.HasSuffix(r.stdout, "\n\n"+exits.String()), "--help ends with the exit statuses:\n%s", r.stdout)
	for _, sub := range []string{"status", "resume"} {
		r := runCL(t, sub, "--help")
		assert.Equal(t, 0, r.code)
		assert.True(t, strings.HasPrefix(r.stdout, "Usage: crashloop "+sub+" --state FILE"), r.stdout)
	}
}

// TestJSONLogFormatIsEverywhere: under --log-format json every line
// crashloop writes is a JSON record: the library's events and crashloop's
// own lines (the program's status, the watchdog, giving up, a refusal, an
// error).
func TestJSONLogFormatIsEverywhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	base := []string{"--log-format=json", "--state=" + state, "--key=j"}
	var msgs []string
	for _, args := range [][]string{
		with(append(base, "--max-respawns=1", "--watchdog=1h", "--grace=10s", "--", "sh", "-c", helper+" ignore=ABRT notify=STATUS=up notify=WATCHDOG=trigger && exec sleep 1000")...),
		with(append(base, "--", "true")...),                       // parked
		with(append(base, "--key=k", "--", "no-such-program")...), // 127
		with(append(base, "--window=-1s", "--", "true")...),       // rejected by the library
		with(append(base, "--grace=-1s", "--", "true")...),        // rejected by crashloop
		with(append(base, "true")...),                             // no --
	} {
		r := runCL(t, args...)
		assert.NotEqual(t, 0, r.code)
		msgs = append(msgs, jsonMessages(t, r.stderr)...)
	}
	assert.Equal(t, []string{
		"the program's status", "watchdog: the program sent WATCHDOG=trigger; stopping the program's process group with SIGABRT",
		`key "j" failed; respawn 1/1 in 1ms`,
		"the program's status", "watchdog: the program sent WATCHDOG=trigger; stopping the program's process group with SIGABRT",
		`key "j" parked (respawn_budget_exhausted, 1 respawn in 10s); it stays parked until an operator resumes it`,
		"giving up on j: respawn_budget_exhausted after 2 starts; last exit: stopped by the watchdog (the program sent WATCHDOG=trigger), killed by signal ABRT",
		"parked in " + state + "; once the cause is fixed, run: crashloop resume --state " + state + " j",
		"j is parked since " + markSince(t, state, "j") + " (respawn_budget_exhausted): sh stopped by the watchdog (the program sent WATCHDOG=trigger), killed by signal ABRT",
		"once the cause is fixed, run: crashloop resume --state " + state + " j",
		"no-such-program: command not found",
		"--window: must be > 0",
		"--grace: must be >= 0",
		"missing -- before the program (usage: crashloop [flags] -- PROGRAM [ARGS...])",
	}, msgs)
}

// jsonMessages checks that every line of stderr is a JSON record, and
// returns their messages.
func jsonMessages(t *testing.T, stderr string) []string {
	t.Helper()
	var msgs []string
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "not JSON: %s", l)
		require.Contains(t, rec, "time")
		require.Contains(t, rec, "level")
		msgs = append(msgs, rec["msg"].(string))
	}
	return msgs
}
