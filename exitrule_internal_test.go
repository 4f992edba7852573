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
	rules := []ExitRule{{"oom", ExitPark}, {"3", ExitStop}, {"1-5,64-78", ExitPark}, {"12,20-21", ExitPlanned}, {"SIGSEGV", ExitStop},
		{"term", ExitPlanned}, {"KILL", ExitRestart}, {"1-255", ExitPlanned}}
	code := func(c int) error { return &programFailure{errtext.Exit{ExitCode: &c}} }
	sig := func(s string, oom bool) error { return &programFailure{errtext.Exit{Signal: s, OOMKilled: oom}} }
	killed := exec.Command("sh", "-c", "kill -SEGV $$").Run() // a real *exec.ExitError of a signal
	exited := exec.Command("sh", "-c", "exit 21").Run()
	for _, tc := range []struct {
		err  error
		want ExitAction
	}{
		{code(3), ExitStop}, {code(4), ExitPark}, {code(1), ExitPark}, {code(5), ExitPark}, {code(6), ExitPlanned},
		{code(64), ExitPark}, {code(78), ExitPark}, {code(79), ExitPlanned}, {code(12), ExitPlanned}, {code(20), ExitPlanned},
		{code(255), ExitPlanned}, {code(0), ExitRestart}, {sig("SEGV", false), ExitStop}, {sig("TERM", false), ExitPlanned},
		{sig("KILL", false), ExitRestart}, {sig("KILL", true), ExitPark}, {sig("HUP", false), ExitRestart},
		{fmt.Errorf("wrapped: %w", code(3)), ExitStop}, {killed, ExitStop}, {exited, ExitPlanned},
		{errors.New("no program"), ExitRestart}, {nil, ExitRestart},
		{&programFailure{errtext.Exit{ExitCode: new(3), Stopped: true}}, ExitRestart}, // the supervisor stopped it
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
	rules := []ExitRule{{"oom", ExitPark}, {"3", ExitStop}, {"1-5,64-78", ExitPark}, {"12,20-21", ExitPlanned}, {"SIGSEGV", ExitStop},
		{"term", ExitPlanned}, {"KILL", ExitRestart}, {"1-255", ExitPlanned}}
	c := 200
	err := error(&programFailure{errtext.Exit{ExitCode: &c}})
	b.ReportAllocs()
	for b.Loop() {
		if exitActionOf(rules, err) != ExitPlanned {
			b.Fatal("no match")
		}
	}
}
