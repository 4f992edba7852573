package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary doubles as the crashloop command: with CRASHLOOP_AS_MAIN
// set it runs main, so the tests exercise the real process, its signals and
// its exit statuses without building anything.
func TestMain(m *testing.M) {
	if os.Getenv("CRASHLOOP_AS_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// fast are flags with millisecond backoffs; tests assert counts, not time.
var fast = []string{"--initial-backoff=1ms", "--max-backoff=3ms", "--window=10s", "--healthy-after=10s"}

type result struct {
	code           int
	stdout, stderr string
}

// crashloop runs the command to completion.
func runCL(t *testing.T, args ...string) result {
	t.Helper()
	cmd := command(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, out.String(), errb.String()}
}

func command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "CRASHLOOP_AS_MAIN=1")
	return cmd
}

// counter is a shell snippet that appends a line to file on every start.
func counter(file string) string { return "echo x >> '" + file + "'; " }

func lines(t *testing.T, file string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(data), "\n")
}

func TestFailingCommandParksAfterTheBudget(t *testing.T) {
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, append(fast, "--key=job", "--", "sh", "-c", counter(f)+"echo starting; exit 1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Equal(t, 4, lines(t, f), "the first start plus 3 respawns")
	assert.Equal(t, strings.Repeat("starting\n", 4), r.stdout)
	assert.Contains(t, r.stderr, "crashloop: giving up on job: respawn_budget_exhausted after 4 starts; last exit: exited with status 1\n")
	assert.Equal(t, 3, strings.Count(r.stderr, "agent.respawn_scheduled"), r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, "agent.startup_exhausted"), r.stderr)
}

func TestMaxRespawnsFlagSetsTheBudget(t *testing.T) {
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, append(fast, "--max-respawns=5", "--", "sh", "-c", counter(f)+"exit 3")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Equal(t, 6, lines(t, f))
}

func TestChildKilledBySignalIsAFailure(t *testing.T) {
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, append(fast, "--", "sh", "-c", counter(f)+"kill -KILL $$")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Equal(t, 4, lines(t, f))
	assert.Contains(t, r.stderr, "last exit: killed by signal killed\n")
}

func TestCleanExitEndsTheRun(t *testing.T) {
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, append(fast, "--", "sh", "-c", counter(f)+"exit 0")...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 1, lines(t, f))
	assert.Empty(t, r.stderr)
}

func TestRecoveringCommandEndsWithItsCleanExit(t *testing.T) {
	f := filepath.Join(t.TempDir(), "starts")
	// Fails twice, then succeeds.
	script := counter(f) + "[ $(wc -l < '" + f + "') -ge 3 ] && exit 0; exit 1"
	r := runCL(t, append(fast, "--", "sh", "-c", script)...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 3, lines(t, f))
	assert.Equal(t, 2, strings.Count(r.stderr, "agent.respawn_scheduled"), r.stderr)
}

func TestRestartAlwaysRestartsCleanExits(t *testing.T) {
	f := filepath.Join(t.TempDir(), "starts")
	// A clean exit before it was healthy is a failed start: it parks.
	r := runCL(t, append(fast, "--restart=always", "--", "sh", "-c", counter(f)+"exit 0")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Equal(t, 4, lines(t, f))
}

func TestPermanentExitCodeParksAtOnce(t *testing.T) {
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, append(fast, "--permanent-exit-codes=78, 125", "--", "sh", "-c", counter(f)+"exit 125")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Equal(t, 1, lines(t, f))
	assert.Contains(t, r.stderr, "giving up on")
	assert.Contains(t, r.stderr, ": permanent_error after 1 starts; last exit: exited with status 125\n")
}

func TestMissingBinaryParksWithoutAPanic(t *testing.T) {
	r := runCL(t, append(fast, "--key=ghost", "--", "/nonexistent/program")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "panic")
	assert.Contains(t, r.stderr, "crashloop: giving up on ghost: respawn_budget_exhausted after 4 starts; last exit: could not start: ")
}

func TestGuardFlagParksOnTheFastGuard(t *testing.T) {
	f := filepath.Join(t.TempDir(), "starts")
	r := runCL(t, append(fast, "--max-respawns=10", "--guard=3/60s", "--", "sh", "-c", counter(f)+"exit 1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Equal(t, 4, lines(t, f), "the guard allows 3 restarts; the 4th failure parks")
	assert.Contains(t, r.stderr, "restart_loop_guard after 4 starts")
	assert.Equal(t, 1, strings.Count(r.stderr, "channel.crash_loop_tripped"), r.stderr)
}

func TestJSONLogFormat(t *testing.T) {
	r := runCL(t, append(fast, "--log-format=json", "--max-respawns=1", "--key=j", "--", "sh", "-c", "exit 1")...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	var kinds []string
	for _, line := range strings.Split(r.stderr, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		assert.Equal(t, "j", rec["key"])
		kinds = append(kinds, rec["event"].(string)+"/"+rec["level"].(string))
	}
	assert.Equal(t, []string{"agent.respawn_scheduled/WARN", "agent.startup_exhausted/ERROR"}, kinds)
}

// startAndWait starts crashloop and waits until the child wrote its pid.
func startAndWait(t *testing.T, pidFile string, args ...string) (*exec.Cmd, int, *bytes.Buffer) {
	t.Helper()
	cmd := command(args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, err := os.ReadFile(pidFile)
		if err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			require.NoError(t, err)
			return cmd, pid, &errb
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the child never started; stderr: %s", errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestSIGTERMReachesTheChildAndItsStatusIsReturned(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script := `trap 'exit 42' TERM; echo $$ > '` + pidFile + `'; while :; do sleep 0.01; done`
	cmd, pid, errb := startAndWait(t, pidFile, append(fast, "--", "sh", "-c", script)...)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 42, exitCode(t, cmd), errb.String())
	assert.False(t, alive(pid), "the child is gone")
}

func TestChildIgnoringSIGTERMIsKilledAfterTheGrace(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script := `trap '' TERM; echo $$ > '` + pidFile + `'; while :; do sleep 0.01; done`
	cmd, pid, errb := startAndWait(t, pidFile, append(fast, "--grace=50ms", "--", "sh", "-c", script)...)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 128+int(syscall.SIGKILL), exitCode(t, cmd), errb.String())
	assert.False(t, alive(pid), "no orphan is left")
}

func TestStateFileKeepsAParkAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	f := filepath.Join(dir, "starts")
	args := append(fast, "--state="+state, "--key=web", "--", "sh", "-c", counter(f)+"exit 1")

	r := runCL(t, args...)
	require.Equal(t, exitParked, r.code, r.stderr)
	require.Equal(t, 4, lines(t, f))

	// A new crashloop refuses to start the child and says how to resume.
	r = runCL(t, args...)
	assert.Equal(t, exitParked, r.code)
	assert.Equal(t, 4, lines(t, f), "the child was not started again")
	assert.Contains(t, r.stderr, "crashloop: web is parked since ")
	assert.Contains(t, r.stderr, "(respawn_budget_exhausted): sh exited with status 1\n")
	assert.Contains(t, r.stderr, "crashloop resume --state "+state+" web\n")

	// status prints the state as JSON.
	r = runCL(t, "status", "--state", state)
	require.Equal(t, 0, r.code, r.stderr)
	var st stateFile
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Equal(t, 1, st.Version)
	require.Contains(t, st.Marks, "web")
	assert.Equal(t, "respawn_budget_exhausted", st.Marks["web"].Reason)
	assert.Equal(t, 4, st.Marks["web"].Starts)
	require.NotNil(t, st.Marks["web"].ExitStatus)
	assert.Equal(t, 1, *st.Marks["web"].ExitStatus)

	// resume clears the mark; the next crashloop starts it with a full budget.
	r = runCL(t, "resume", "--state", state, "web")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "crashloop: resumed web; it starts with a full budget next time\n", r.stdout)
	r = runCL(t, "resume", "--state", state, "web")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "web is not parked")

	r = runCL(t, args...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Equal(t, 8, lines(t, f))
}

func TestResumeWithoutKeyTakesTheOnlyMark(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	r := runCL(t, append(fast, "--state="+state, "--key=only", "--max-respawns=0", "--", "sh", "-c", "exit 1")...)
	require.Equal(t, exitParked, r.code, r.stderr)
	r = runCL(t, "resume", "--state", state)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "resumed only")
}

func TestTwoCrashloopsShareOneStateFile(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	keys := []string{"a", "b", "c", "d"}
	var wg sync.WaitGroup
	codes := make([]int, len(keys))
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = runCL(t, append(fast, "--state="+state, "--key="+k, "--max-respawns=0", "--", "sh", "-c", "exit 1")...).code
		}()
	}
	wg.Wait()
	assert.Equal(t, []int{exitParked, exitParked, exitParked, exitParked}, codes)
	r := runCL(t, "status", "--state", state)
	var st stateFile
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.ElementsMatch(t, keys, st.keys(), "no crashloop lost another's mark")
}

func TestBadInputIsOneLineAndExit2(t *testing.T) {
	dir := t.TempDir()
	badConfig := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(badConfig, []byte(`{"budget": {"window": "soon"}}`), 0o644))
	unknownConfig := filepath.Join(dir, "unknown.json")
	require.NoError(t, os.WriteFile(unknownConfig, []byte(`{"guard": {"windw": "1s"}}`), 0o644))
	badState := filepath.Join(dir, "state.json")
	garbage := []byte("{not json")
	require.NoError(t, os.WriteFile(badState, garbage, 0o644))

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--frobnicate", "--", "true"}, "crashloop: flag provided but not defined: -frobnicate (see crashloop -h)\n"},
		{"missing --", []string{"sh", "-c", "exit 1"}, "crashloop: missing -- before the command (usage: crashloop [flags] -- CMD [ARGS...])\n"},
		{"empty command", []string{"--"}, "crashloop: no command after -- (usage: crashloop [flags] -- CMD [ARGS...])\n"},
		{"bad duration", []string{"--window=soon", "--", "true"}, "crashloop: invalid value \"soon\" for flag -window: parse error (see crashloop -h)\n"},
		{"invalid setting", []string{"--window=-1s", "--", "true"}, "crashloop: crashloop: invalid configuration: budget.window = -1s: must be > 0\n"},
		{"never parks", []string{"--initial-backoff=10s", "--max-backoff=10s", "--window=20s", "--", "true"}, "crashloop: crashloop: invalid configuration: budget.window = 20s: must be >= the sum of the first 3 backoffs (30s), or a crash loop never parks\n"},
		{"bad guard", []string{"--guard=often", "--", "true"}, "crashloop: --guard=\"often\": want \"off\", \"on\" or N/DURATION such as 3/60s\n"},
		{"bad backoff", []string{"--backoff=cubic", "--", "true"}, "crashloop: --backoff=\"cubic\": want \"linear\" or \"exponential\"\n"},
		{"bad jitter", []string{"--jitter=lots", "--", "true"}, "crashloop: --jitter=\"lots\": want \"none\", \"full\", \"equal\" or \"decorrelated\"\n"},
		{"bad log format", []string{"--log-format=xml", "--", "true"}, "crashloop: --log-format=\"xml\": want \"text\" or \"json\"\n"},
		{"bad exit codes", []string{"--permanent-exit-codes=1,x", "--", "true"}, "crashloop: --permanent-exit-codes: \"x\" is not an exit status from 1 to 255\n"},
		{"malformed config", []string{"--config=" + badConfig, "--", "true"}, "crashloop: --config " + badConfig + ": crashloop: invalid configuration: budget.window = soon: must be a duration string such as \"60s\" or \"500ms\"\n"},
		{"unknown config key", []string{"--config=" + unknownConfig, "--", "true"}, "crashloop: --config " + unknownConfig + ": crashloop: invalid configuration: guard.windw = \"1s\": must be a known setting (unknown key)\n"},
		{"missing config", []string{"--config=" + filepath.Join(dir, "nope.json"), "--", "true"}, "crashloop: --config: open " + filepath.Join(dir, "nope.json") + ": no such file or directory\n"},
		{"malformed state", []string{"--state=" + badState, "--", "true"}, "crashloop: state file " + badState + " is malformed: invalid character 'n' looking for beginning of object key string\n"},
		{"resume without state", []string{"resume", "web"}, "crashloop: resume needs --state FILE\n"},
		{"resume malformed state", []string{"resume", "--state", badState, "web"}, "crashloop: state file " + badState + " is malformed: invalid character 'n' looking for beginning of object key string\n"},
		{"status without state", []string{"status"}, "crashloop: status needs --state FILE\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCL(t, c.args...)
			assert.Equal(t, exitUsage, r.code)
			assert.Equal(t, c.want, r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
	data, err := os.ReadFile(badState)
	require.NoError(t, err)
	assert.Equal(t, garbage, data, "a malformed state file is never overwritten")
}

func TestDefaultKeyIsStableAndReadable(t *testing.T) {
	k := defaultKey([]string{"sh", "-c", "exit 1"})
	assert.Equal(t, k, defaultKey([]string{"sh", "-c", "exit 1"}))
	assert.NotEqual(t, k, defaultKey([]string{"sh", "-c", "exit 2"}))
	assert.True(t, strings.HasPrefix(k, "sh-"), k)
	assert.Len(t, k, len("sh-")+8)
}

func TestFlagsOverrideOnlyWhatTheySet(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "cfg.json")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`{
		"chain": {"max_chain": 7, "reset_gap": "40m"},
		"backoff": {"kind": "exponential", "initial": "100ms", "factor": 3, "max": "2s"}}`), 0o644))

	s := newSettings(io.Discard)
	_, err := parseFlags(s.fs, []string{"--config=" + cfgFile, "--chain-gap=5m", "--jitter=full"})
	require.NoError(t, err)
	cfg, err := s.configuration()
	require.NoError(t, err)
	require.NotNil(t, cfg.Chain)
	assert.Equal(t, crashloop.ChainConfig{MaxChain: 7, ResetGap: 5 * time.Minute}, *cfg.Chain, "--chain-gap keeps the file's max_chain")
	out, err := json.Marshal(cfg)
	require.NoError(t, err)
	var doc struct {
		Backoff map[string]any `json:"backoff"`
	}
	require.NoError(t, json.Unmarshal(out, &doc))
	assert.Equal(t, map[string]any{"kind": "exponential", "initial": "100ms", "factor": 3.0, "max": "2s", "jitter": "full"}, doc.Backoff,
		"--jitter alone keeps the file's exponential curve")

	s = newSettings(io.Discard)
	_, err = parseFlags(s.fs, []string{"--config=" + cfgFile, "--chain-max=0", "--backoff=linear"})
	require.NoError(t, err)
	cfg, err = s.configuration()
	require.NoError(t, err)
	assert.Nil(t, cfg.Chain, "--chain-max=0 turns the chain off")
	out, err = json.Marshal(cfg)
	require.NoError(t, err)
	doc.Backoff = nil // Unmarshal merges into a map it is given
	require.NoError(t, json.Unmarshal(out, &doc))
	assert.Equal(t, map[string]any{"kind": "linear", "initial": "100ms", "max": "2s"}, doc.Backoff)
}
