package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/stretchr/testify/require"
)

// exitFailure is a failure that tells how a program ended.
type exitFailure struct{ x errtext.Exit }

func (e *exitFailure) Error() string             { return "sh exited with status 3" }
func (e *exitFailure) ProgramExit() errtext.Exit { return e.x }

// How the program of a park ended (the cause as errtext.Text keeps it)
// reaches every replica: in the notice, a lookup, the parks listed, and a
// park written back.
func TestParkKeepsHowTheProgramEnded(t *testing.T) {
	s := redistest.Start(t)
	prefix := newPrefix()
	one := New(testClient(t, s), Options{Prefix: prefix, Replica: "replica-0"})
	two := New(testClient(t, s), Options{Prefix: prefix, Replica: "replica-1"})
	var c told
	require.NoError(t, one.Open(crashloop.DefaultSupervisorConfig(), nil))
	require.NoError(t, two.Open(crashloop.DefaultSupervisorConfig(), c.notify))
	t.Cleanup(func() { _ = one.Close(); _ = two.Close() })
	reconciled(t, two)
	three := 3
	x := errtext.Exit{ExitCode: &three, StderrTail: "fatal: missing setting db_url\nbye\n"}
	ctx := context.Background()
	now := time.Now()
	v, err := one.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingPermanent, Incarnation: "k#1",
		Cause: errtext.Text(&exitFailure{x}), Now: now, Members: 1})
	require.NoError(t, err)
	require.True(t, v.NewPark)
	c.until(t, "+k@1 permanent_error 0 sh exited with status 3")

	check := func(what string, pe *crashloop.ParkedError) {
		t.Helper()
		require.NotNil(t, pe, what)
		require.Equal(t, "sh exited with status 3", pe.LastError.Error(), what)
		got, ok := errtext.ExitOf(pe.LastError)
		require.True(t, ok, what)
		require.Equal(t, x, got, what)
	}
	check("the verdict", v.Park)
	ch, err := two.Lookup(ctx, "k")
	require.NoError(t, err)
	check("a lookup", ch.Park)
	parks, err := two.Parked(ctx)
	require.NoError(t, err)
	require.Len(t, parks, 1)
	check("the parks listed", parks[0])

	// a park decided alone, written back
	back := &crashloop.ParkedError{Key: "j", Reason: crashloop.ReasonBudgetExhausted, Attempts: 3, Since: now,
		LastError: &exitFailure{errtext.Exit{Signal: "KILL", StderrTail: "killed\n"}}}
	res, err := two.Restore(ctx, []*crashloop.ParkedError{back})
	require.NoError(t, err)
	require.True(t, res[0].Written)
	ch, err = one.Lookup(ctx, "j")
	require.NoError(t, err)
	got, ok := errtext.ExitOf(ch.Park.LastError)
	require.True(t, ok)
	require.Equal(t, errtext.Exit{Signal: "KILL", StderrTail: "killed\n"}, got)
	require.False(t, errors.Is(ch.Park.LastError, crashloop.ErrNeedsHuman))
}
