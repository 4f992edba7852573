//go:build unix

package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFilesPastTheirLimitAreRefusedInFlatMemory: a config, state or token
// file past its documented limit is refused with a line naming the flag
// and the limit, after reading no more than the limit: crashloop's peak
// memory stays far below the file's size.
func TestFilesPastTheirLimitAreRefusedInFlatMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge")
	require.NoError(t, os.WriteFile(huge, nil, 0o600))
	require.NoError(t, os.Truncate(huge, 256<<20)) // sparse: 256 MiB of zeros on no disk
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"config", with("--config", huge, "--", "true"), "--config " + huge + ": larger than 1 MiB, the most crashloop reads"},
		{"state", []string{"status", "--state", huge}, "state file " + huge + ": larger than 16 MiB, the most crashloop reads"},
		{"state of a run", with("--state", huge, "--", "true"), "state file " + huge + ": larger than 16 MiB, the most crashloop reads"},
		{"token", with("--on-park=wait", "--metrics-addr=127.0.0.1:0", "--admin-token-file", huge, "--", "true"), "--admin-token-file " + huge + ": larger than 4 KiB, the most crashloop reads"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := command(c.args...)
			r := runCmd(t, cmd)
			assert.Equal(t, exitUsage, r.code)
			assert.Equal(t, "crashloop: "+c.want+"\n", r.stderr)
			rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
			assert.Less(t, rss, int64(128<<20), "peak memory %d MiB for a 256 MiB file", rss>>20)
		})
	}
}

// TestResumeRefusesALargeBody: POST /resume needs no body, and one past
// 4 KiB is refused with 413 without a resume.
func TestResumeRefusesALargeBody(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	c := startCL(t, with("--log-format=json", "--on-park=wait", "--max-respawns=0", "--metrics-addr=127.0.0.1:0", "--admin-token-file", token, "--key=big", "--", helper, "exit=1")...)
	addr := metricsAddr(t, c)
	require.Eventually(t, func() bool {
		return strings.Contains(c.stderr.String(), "the program stays stopped until it is resumed")
	}, patience, tick, "the park")
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/resume", strings.NewReader(strings.Repeat("x", 5<<10)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	c.signal(t, syscall.SIGTERM)
	assert.Equal(t, 0, c.wait(t), c.stderr.String())
	assert.NotContains(t, c.stderr.String(), "resumed over HTTP")
}

// TestPersistenceTellsTheTruth: an empty state file is an empty state; a
// missing folder is named with --state; a park that could not be recorded
// says so and exits 1; and without --state or --redis the park's line says
// that it ends with this crashloop.
func TestPersistenceTellsTheTruth(t *testing.T) {
	t.Parallel()
	t.Run("empty state file", func(t *testing.T) {
		t.Parallel()
		state := filepath.Join(t.TempDir(), "state.json")
		require.NoError(t, os.WriteFile(state, nil, 0o644)) // touch
		r := runCL(t, "status", "--state", state)
		assert.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, "nothing is parked in "+state+"\n", r.stdout)
		r = runCL(t, with("--state", state, "--max-respawns=0", "--key=e", "--", helper, "exit=1")...)
		assert.Equal(t, exitParked, r.code, r.stderr)
		r = runCL(t, "status", "--state", state)
		assert.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "\ne ", "the park is recorded in the touched file")
	})
	t.Run("missing folder", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "var", "lib", "crashloop")
		state := filepath.Join(dir, "state.json")
		r := runCL(t, with("--state", state, "--", "true")...)
		assert.Equal(t, exitUsage, r.code, r.stderr)
		assert.Equal(t, fmt.Sprintf("crashloop: --state %s: the folder %s does not exist (crashloop creates the file, not its folder: mkdir -p %s)\n", state, dir, dir), r.stderr)
	})
	t.Run("park not recorded, state corrupted", func(t *testing.T) {
		t.Parallel()
		state := filepath.Join(t.TempDir(), "state.json")
		r := runCL(t, with("--state", state, "--max-respawns=0", "--key=c", "--", helper, "env="+state, "exit=1")...)
		assert.Equal(t, exitError, r.code, r.stderr)
		assert.Contains(t, r.stderr, "crashloop: the park of c was not recorded: state file "+state+" is malformed: ")
		assert.True(t, strings.HasSuffix(r.stderr, "; a crashloop started with --state "+state+" will run the program again\n"), r.stderr)
	})
	t.Run("park not recorded, lock unusable", func(t *testing.T) {
		t.Parallel()
		state := filepath.Join(t.TempDir(), "state.json")
		script := fmt.Sprintf("rm -f %[1]s.lock && mkdir %[1]s.lock && exit 1", state)
		r := runCL(t, with("--state", state, "--max-respawns=0", "--key=l", "--", "sh", "-c", script)...)
		assert.Equal(t, exitError, r.code, r.stderr)
		assert.Contains(t, r.stderr, "crashloop: the park of l was not recorded: state file "+state+": ")
	})
	t.Run("no persistence", func(t *testing.T) {
		t.Parallel()
		r := runCL(t, with("--max-respawns=0", "--key=n", "--", helper, "exit=1")...)
		assert.Equal(t, exitParked, r.code, r.stderr)
		assert.Contains(t, r.stderr, `parked (respawn_budget_exhausted, 0 respawns in 10s); nothing records the park (no --state or --redis): it ends with this crashloop, and the next one starts the program`)
		assert.NotContains(t, r.stderr, "until an operator resumes it")
	})
}

// TestUnknownCommand: a first word that is no command is named, with the
// nearest command and the list, and exit status 2; help lists the topics
// and explains each.
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	const tail = "; the commands are status, resume, replay, simulate, tune, plan and help; to supervise a program: crashloop [flags] -- PROGRAM [ARGS...]\n"
	for word, want := range map[string]string{
		"stauts":  `crashloop: unknown command "stauts" (did you mean status?)` + tail,
		"resme":   `crashloop: unknown command "resme" (did you mean resume?)` + tail,
		"replya":  `crashloop: unknown command "replya" (did you mean replay?)` + tail,
		"sh":      `crashloop: unknown command "sh"` + tail,
		"deploy":  `crashloop: unknown command "deploy"` + tail,
		"./api":   `crashloop: unknown command "./api"` + tail,
		"simulat": `crashloop: unknown command "simulat" (did you mean simulate?)` + tail,
		"plna":    `crashloop: unknown command "plna" (did you mean plan?)` + tail,
	} {
		r := runCL(t, word, "--state", "x")
		assert.Equal(t, exitUsage, r.code, word)
		assert.Equal(t, want, r.stderr, word)
		assert.Empty(t, r.stdout)
	}
	r := runCL(t, "help")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Help topics: run, status, resume, replay, simulate, tune, plan, endpoints, exit-status, limits and json.\n")
	help := runCL(t, "--help")
	for topic, want := range map[string]string{
		"run": help.stdout, "status": statusHelp, "resume": resumeHelp, "replay": replayHelp, "simulate": simulateHelp, "plan": planHelp,
		"endpoints": "Authorization: Bearer TOKEN", "exit-status": "Exit status:\n", "limits": "--config FILE            1 MiB", "json": "snake_case",
	} {
		r := runCL(t, "help", topic)
		assert.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, want, topic)
	}
	r = runCL(t, "help", "endpoint")
	assert.Equal(t, exitUsage, r.code)
	assert.Equal(t, `crashloop: unknown help topic "endpoint" (did you mean endpoints?); the topics are run, status, resume, replay, simulate, tune, plan, endpoints, exit-status, limits and json`+"\n", r.stderr)
}

// TestHelpSaysWhatAnOperatorNeeds: --help alone tells what --on-park wait
// needs, the Authorization: Bearer form, what /readyz answers, and its
// wait example names --key.
func TestHelpSaysWhatAnOperatorNeeds(t *testing.T) {
	t.Parallel()
	r := runCL(t, "--help")
	require.Equal(t, 0, r.code)
	flat := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{
		"wait needs --state, --redis or --admin-token-file",
		`"Authorization: Bearer TOKEN"`,
		"/readyz (200 while the program runs healthy, 503 otherwise)",
		"crashloop --on-park wait --state /data/crashloop.json --key worker --metrics-addr :9464 -- /app/worker",
		"crashloop help [TOPIC]",
	} {
		assert.Contains(t, flat, want)
	}
}

// TestKeeperIsNamedCrashloop: the keeper shows as crashloop in ps, top and
// pgrep (its comm), not as "exe".
func TestKeeperIsNamedCrashloop(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the keeper's comm is set with prctl, on Linux")
	}
	ready := filepath.Join(t.TempDir(), "ready")
	c := startCL(t, with("--", helper, "touch="+ready, "hang")...)
	require.Eventually(t, func() bool { return exists(ready) }, patience, tick, "the program to start")
	var keeper []int
	for _, p := range procs(t) {
		if p.ppid == c.cmd.Process.Pid && strings.HasPrefix(p.cmdline, "crashloop-keeper ") {
			keeper = append(keeper, p.pid)
		}
	}
	require.Len(t, keeper, 1)
	// The keeper names itself as it starts, which may be after the program.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", keeper[0]))
		require.NoError(ct, err)
		assert.Equal(ct, "crashloop\n", string(comm))
	}, patience, tick, "the keeper's name")
	c.signal(t, syscall.SIGTERM)
	c.wait(t)
}

// TestAnEndlessFileIsRefusedInFlatMemory: a config that never ends (a
// device) is refused after its limit, not read until memory runs out.
func TestAnEndlessFileIsRefusedInFlatMemory(t *testing.T) {
	t.Parallel()
	cmd := command(with("--config", "/dev/zero", "--", "true")...)
	r := runCmd(t, cmd)
	assert.Equal(t, exitUsage, r.code)
	assert.Equal(t, "crashloop: --config /dev/zero: larger than 1 MiB, the most crashloop reads\n", r.stderr)
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	assert.Less(t, rss, int64(128<<20), "peak memory %d MiB", rss>>20)
}
