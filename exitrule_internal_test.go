//go:build unix

package crashloop

import (
	"errors"
	"fmt"
	"os/exec"
	"testing"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// programFailure is a failure that tells how a program ended, as the
// crashloop command's are.
type programFailure struct{ x errtext.Exit }

func (f *programFailure) Error() string             { return "program failed" }
func (f *programFailure) ProgramExit() errtext.Exit { return f.x }

// The rules are judged on every failure that tells a program's end:
// first match wins, and the judgment allocates nothing.
func TestExitActionOf(t *testing.T) {
	rules := []ExitRule{"oom=park", "3=stop", "1-5,64-78=park", "12,20-21=planned", "SIGSEGV=stop", "term=planned", "KILL=restart",
		"1-255=planned"}
	code := func(c int) error { return &programFailure{errtext.Exit{ExitCode: &c}} }
	sig := func(s string, oom bool) error { return &programFailure{errtext.Exit{Signal: s, OOMKilled: oom}} }
	killed := exec.Command("sh", "-c", "kill -SEGV $$").Run() // a real *exec.ExitError of a signal
	exited := exec.Command("sh", "-c", "exit 21").Run()
	for _, tc := range []struct {
		err  error
		want exitAction
	}{
		{code(3), exitStop}, {code(4), exitPark}, {code(1), exitPark}, {code(5), exitPark}, {code(6), exitPlanned},
		{code(64), exitPark}, {code(78), exitPark}, {code(79), exitPlanned}, {code(12), exitPlanned}, {code(20), exitPlanned},
		{code(255), exitPlanned}, {code(0), exitRestart}, {sig("SEGV", false), exitStop}, {sig("TERM", false), exitPlanned},
		{sig("KILL", false), exitRestart}, {sig("KILL", true), exitPark}, {sig("HUP", false), exitRestart},
		{fmt.Errorf("wrapped: %w", code(3)), exitStop}, {killed, exitStop}, {exited, exitPlanned},
		{errors.New("no program"), exitRestart}, {nil, exitRestart},
		{&programFailure{errtext.Exit{ExitCode: new(3), Stopped: true}}, exitRestart}, // the supervisor stopped it
	} {
		if got := exitActionOf(rules, tc.err); got != tc.want {
			t.Errorf("exitActionOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if raceEnabled {
		return // the race detector distorts allocation counts
	}
	for _, err := range []error{code(79), sig("KILL", true), killed, errors.New("plain")} {
		if n := testing.AllocsPerRun(1000, func() { exitActionOf(rules, err) }); n != 0 {
			t.Errorf("exitActionOf(%v): %v allocations, want 0", err, n)
		}
	}
}

// BenchmarkExitActionOf judges a failure against eight rules, the last of
// which matches.
func BenchmarkExitActionOf(b *testing.B) {
	rules := []ExitRule{"oom=park", "3=stop", "1-5,64-78=park", "12,20-21=planned", "SIGSEGV=stop", "term=planned", "KILL=restart",
		"1-255=planned"}
	c := 200
	err := error(&programFailure{errtext.Exit{ExitCode: &c}})
	b.ReportAllocs()
	for b.Loop() {
		if exitActionOf(rules, err) != exitPlanned {
			b.Fatal("no match")
		}
	}
}
