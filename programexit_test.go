package crashloop_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exitFailure is a run's failure that tells how its program ended, as the
// crashloop command's runs do.
type exitFailure struct{ x errtext.Exit }

func (e *exitFailure) Error() string             { return "sh exited with status 3" }
func (e *exitFailure) ProgramExit() errtext.Exit { return e.x }

// How the program ended stays with the park: in its LastError, the key's
// status (and its JSON), and a snapshot restored elsewhere.
func TestParkKeepsHowTheProgramEnded(t *testing.T) {
	three := 3
	x := errtext.Exit{ExitCode: &three, StderrTail: "fatal: missing setting db_url\n"}
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Budget.MaxRespawns = 0
	s, err := crashloop.NewSupervisor(cfg)
	require.NoError(t, err)
	err = s.Run(context.Background(), "w", func(context.Context) error { return &exitFailure{x} })
	var pe *crashloop.ParkedError
	require.ErrorAs(t, err, &pe)
	got, ok := errtext.ExitOf(pe.LastError)
	require.True(t, ok)
	assert.Equal(t, x, got)

	ks := s.Status(t.Context()).Keys["w"]
	assert.Equal(t, "sh exited with status 3", ks.LastError)
	assert.Equal(t, &three, ks.ExitCode)
	assert.Equal(t, "", ks.Signal)
	assert.Equal(t, x.StderrTail, ks.StderrTail)
	data, err := json.Marshal(ks)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"last_error":"sh exited with status 3","park_reason":"respawn_budget_exhausted"`)
	assert.Contains(t, string(data), `"exit_code":3,"stderr_tail":"fatal: missing setting db_url\n"}`)
	assert.NotContains(t, string(data), `"signal"`)

	snap, err := s.Snapshot()
	require.NoError(t, err)
	s2, err := crashloop.NewSupervisor(cfg)
	require.NoError(t, err)
	require.NoError(t, s2.Restore(snap))
	ks2 := s2.Status(t.Context()).Keys["w"]
	assert.Equal(t, []any{ks.LastError, ks.ExitCode, ks.Signal, ks.StderrTail}, []any{ks2.LastError, ks2.ExitCode, ks2.Signal, ks2.StderrTail},
		"the restored key's status")
	err = s2.Run(context.Background(), "w", func(context.Context) error { return nil })
	require.ErrorAs(t, err, &pe)
	got, ok = errtext.ExitOf(pe.LastError)
	require.True(t, ok, "the restored park's LastError")
	assert.Equal(t, x, got)
	assert.Equal(t, "sh exited with status 3", pe.LastError.Error())
}
