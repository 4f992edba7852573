//go:build unix

package crashloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runSh runs sh -c script, a real child process, and returns its error:
// an *exec.ExitError unless it exited 0.
func runSh(t *testing.T, script string) error {
	t.Helper()
	err := exec.Command("sh", "-c", script).Run()
	if _, ok := errors.AsType[*exec.ExitError](err); !ok {
		t.Fatalf("sh -c %q: %v, not an *exec.ExitError", script, err)
	}
	return err
}

func TestExitRuleCheck(t *testing.T) {
	for _, r := range []crashloop.ExitRule{"78=park", "1-9,12=restart", "SIGKILL=stop", "segv=planned", "oom=park", "1-255=stop"} {
		assert.NoError(t, r.Check(), r)
	}
	const codes = `a MATCH of exit statuses from 1 to 255 (3, 64-78, 1,2,5-9), a signal (SIGSEGV or SEGV) or oom`
	for _, tc := range []struct{ in, rule string }{
		{"78", "MATCH=ACTION, such as 78=park or SIGKILL=stop"},
		{"78=retry", "an ACTION of restart, park, stop or planned"},
		{"78=", "an ACTION of restart, park, stop or planned"},
		{"=park", codes},
		{"0=park", codes},
		{"256=park", codes},
		{"9-3=park", codes},
		{"1,,2=park", codes},
		{"1,=park", codes},
		{"+3=park", codes},
		{"-3=park", codes},
		{"3-=park", codes},
		{"SIGFOO=park", "a MATCH naming a POSIX signal such as SIGKILL, SIGSEGV or SEGV"},
		{"SIG=park", "a MATCH naming a POSIX signal such as SIGKILL, SIGSEGV or SEGV"},
	} {
		err := crashloop.ExitRule(tc.in).Check()
		assert.Equal(t, &crashloop.ConfigError{Field: "exit_rules", Value: tc.in, Rule: tc.rule}, err, tc.in)
		assert.ErrorIs(t, err, crashloop.ErrInvalidConfig)
	}
}

func TestExitRulesJSON(t *testing.T) {
	cfg := crashloop.DefaultSupervisorConfig()
	err := json.Unmarshal([]byte(`{"exit_rules": ["oom=park", "78=park", "SIGSEGV=stop", "0=park"]}`), &cfg)
	assert.Equal(t, &crashloop.ConfigError{Field: "exit_rules", Value: "0=park",
		Rule: `a MATCH of exit statuses from 1 to 255 (3, 64-78, 1,2,5-9), a signal (SIGSEGV or SEGV) or oom`}, err)
	err = json.Unmarshal([]byte(`{"exit_rules": [78]}`), &cfg)
	assert.Equal(t, &crashloop.ConfigError{Field: "exit_rules", Value: "78", Rule: `a "MATCH=ACTION" string such as "78=park"`}, err)
	err = json.Unmarshal([]byte(`{"exit_rules": "78=park"}`), &cfg)
	assert.Equal(t, &crashloop.ConfigError{Field: "exit_rules", Value: `"78=park"`, Rule: `a list of "MATCH=ACTION" strings such as ["78=park"]`}, err)

	cfg = crashloop.DefaultSupervisorConfig()
	require.NoError(t, json.Unmarshal([]byte(`{"exit_rules": ["oom=park", "64-78=park", "SEGV=stop", "75=planned"]}`), &cfg))
	assert.Equal(t, []crashloop.ExitRule{"oom=park", "64-78=park", "SEGV=stop", "75=planned"}, cfg.ExitRules)
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	assert.Equal(t, []any{"oom=park", "64-78=park", "SEGV=stop", "75=planned"}, doc["exit_rules"])
	data, err = json.Marshal(crashloop.DefaultSupervisorConfig())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &doc))
	assert.Equal(t, []any{}, doc["exit_rules"], "no rules: an empty list")

	// A rule built in Go is checked by NewSupervisor.
	cfg = crashloop.DefaultSupervisorConfig()
	cfg.ExitRules = []crashloop.ExitRule{"3=park", "KILL=retry"}
	_, err = crashloop.NewSupervisor(cfg)
	assert.Equal(t, &crashloop.ConfigError{Field: "exit_rules", Value: "KILL=retry", Rule: "an ACTION of restart, park, stop or planned"}, err)
	cfg.ExitRules = []crashloop.ExitRule{""}
	_, err = crashloop.NewSupervisor(cfg)
	assert.Equal(t, &crashloop.ConfigError{Field: "exit_rules", Value: "", Rule: "MATCH=ACTION, such as 78=park or SIGKILL=stop"}, err)
}

// Each action on the failures of real child processes, judged by Decide:
// the decision and its events, exactly.
func TestExitRulesOnRealProcesses(t *testing.T) {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil // keys parked on purpose would trip it
	rules := []string{"oom=park", "3=stop", "1-5=park", "64-78=park", "12,20-21=planned", "SIGSEGV=stop", "SIGTERM=planned", "SIGKILL=restart"}
	for _, r := range rules {
		cfg.ExitRules = append(cfg.ExitRules, crashloop.ExitRule(r))
	}
	s, rec := decideSupervisor(t, cfg)
	ctx := context.Background()
	at := func(d time.Duration) time.Time { return testT0.Add(d) }

	// stop: supervision ends with the run's error; nothing is announced.
	exit3 := runSh(t, "exit 3")
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: exit3}, s.DecideAt(ctx, "stop", crashloop.RunResult{Err: exit3}, at(0)))
	segv := runSh(t, "kill -SEGV $$")
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: segv}, s.DecideAt(ctx, "segv", crashloop.RunResult{Err: segv}, at(0)))
	assert.Equal(t, crashloop.StateExited, s.Status(ctx).Keys["stop"].State)
	assert.Empty(t, rec.Events())

	// park: at once, permanent_error; the first match wins (4 is in 1-5, 3 was not).
	exit4 := runSh(t, "exit 4")
	d := s.DecideAt(ctx, "park", crashloop.RunResult{Err: exit4}, at(time.Second))
	pe := &crashloop.ParkedError{Key: "park", Reason: crashloop.ReasonPermanent, LastError: exit4, Since: at(time.Second)}
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionStop, Err: pe}, d)
	exit78 := runSh(t, "exit 78")
	d = s.DecideAt(ctx, "ex_config", crashloop.RunResult{Err: exit78}, at(time.Second))
	assert.Equal(t, crashloop.ReasonPermanent, d.Err.(*crashloop.ParkedError).Reason)
	assert.Equal(t, []supEvent{exhaustedEv(time.Second, "park", crashloop.ReasonPermanent, exit4, 0),
		exhaustedEv(time.Second, "ex_config", crashloop.ReasonPermanent, exit78, 0)}, rec.Events())
	rec.Take()

	// planned: at once, no budget spent, reason planned; by status and by signal.
	for i, script := range []string{"exit 12", "exit 21", "kill -TERM $$", "exit 20"} {
		err := runSh(t, script)
		d := s.DecideAt(ctx, "planned", crashloop.RunResult{Err: err}, at(2*time.Second))
		assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart}, d, script)
		assert.Equal(t, []supEvent{restartEv(2*time.Second, "planned", "planned#1", crashloop.ReasonPlanned, err, i+1, 0)}, rec.Events(), script)
		rec.Take()
	}
	assert.Equal(t, 0, s.Status(ctx).Keys["planned"].Respawns, "a planned restart spends no budget")

	// restart: judged by the budget, as is a status no rule matches (9)
	// and an error that tells of no program.
	kill := runSh(t, "kill -KILL $$")
	exit9 := runSh(t, "exit 9")
	plain := errors.New("plain")
	for i, err := range []error{kill, exit9, plain} {
		d := s.DecideAt(ctx, "restart", crashloop.RunResult{Err: err}, at(3*time.Second))
		assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart, Wait: time.Duration(i+1) * 500 * time.Millisecond}, d)
	}
	assert.Equal(t, []supEvent{respawnEv(3*time.Second, "restart", kill, 1, millis(500)), respawnEv(3*time.Second, "restart", exit9, 2, millis(1000)),
		respawnEv(3*time.Second, "restart", plain, 3, millis(1500))}, rec.Events())
	rec.Take()

	// Permanent and Restart keep their marks over the rules.
	d = s.DecideAt(ctx, "marked", crashloop.RunResult{Err: crashloop.Permanent(exit3)}, at(4*time.Second))
	assert.Equal(t, crashloop.ReasonPermanent, d.Err.(*crashloop.ParkedError).Reason)
	d = s.DecideAt(ctx, "marked2", crashloop.RunResult{Err: crashloop.Restart(exit78)}, at(4*time.Second))
	assert.Equal(t, crashloop.Decision{Action: crashloop.ActionRestart}, d)
}

// A stop rule ends Run with the program's error: a real child process,
// one run.
func TestExitRuleStopEndsRun(t *testing.T) {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.ExitRules = []crashloop.ExitRule{"7=stop"}
	s, _ := decideSupervisor(t, cfg)
	runs := 0
	err := s.Run(context.Background(), "k", func(ctx context.Context) error {
		runs++
		return exec.CommandContext(ctx, "sh", "-c", "exit 7").Run()
	})
	ee, ok := errors.AsType[*exec.ExitError](err)
	require.True(t, ok, "Run returned %v", err)
	assert.Equal(t, 7, ee.ExitCode())
	assert.Equal(t, 1, runs)
}

// FuzzExitRule checks random rules: a rejected one is a *ConfigError of
// "exit_rules" carrying the rule as typed; a Supervisor takes an accepted
// one and judges real-looking failures with it without a panic.
func FuzzExitRule(f *testing.F) {
	for _, s := range []string{"78=park", "1-9,12=restart", "SIGKILL=stop", "segv=planned", "oom=park", "0=park", "9-3=stop",
		"1,,2=park", "=park", "78", "SIG=stop", "sigsig=stop", "1-255=planned", "255-255=stop", "+1=park", "1=park=stop"} {
		f.Add(s, 3, "KILL")
	}
	f.Fuzz(func(t *testing.T, s string, code int, signal string) {
		r := crashloop.ExitRule(s)
		if err := r.Check(); err != nil {
			ce, ok := errors.AsType[*crashloop.ConfigError](err)
			if !ok || ce.Field != "exit_rules" || ce.Value != s || ce.Rule == "" || !errors.Is(err, crashloop.ErrInvalidConfig) {
				t.Fatalf("ExitRule(%q).Check() = %#v", s, err)
			}
			return
		}
		cfg := crashloop.DefaultSupervisorConfig()
		cfg.ExitRules = []crashloop.ExitRule{r}
		sup, err := crashloop.NewSupervisor(cfg)
		if err != nil {
			t.Fatalf("NewSupervisor rejects the rule %q Check accepted: %v", s, err)
		}
		for _, e := range []error{exitCodeError(code), errors.New(signal)} {
			d := sup.DecideAt(context.Background(), "k", crashloop.RunResult{Err: e}, testT0)
			if d.Action == 0 {
				t.Fatalf("no action for %v under %q", e, s)
			}
		}
	})
}

// exitCodeError is an error that tells an exit status, as *exec.ExitError
// does.
type exitCodeError int

func (e exitCodeError) Error() string { return "exited with status " + strconv.Itoa(int(e)) }
func (e exitCodeError) ExitCode() int { return int(e) }
