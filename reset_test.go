package crashloop_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runResetting runs a key that fails each run until it parks, calling
// crashloop.ResetRestarts in run resetAt (0: never, -1: late, after the
// run), and Ready in every run when ready. It returns the starts and the
// park.
func runResetting(t *testing.T, resetAt int, ready bool) (int, *crashloop.ParkedError, *crashloop.Supervisor) {
	s, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // a loop that never parks ends here
	defer cancel()
	starts := 0
	err = s.Run(ctx, "w", func(ctx context.Context) error {
		starts++
		if ready {
			crashloop.Ready(ctx)
		}
		switch {
		case starts == resetAt:
			crashloop.ResetRestarts(ctx)
		case resetAt == -1:
			go func() {
				time.Sleep(100 * time.Millisecond) // after fn returned, inside the backoff
				crashloop.ResetRestarts(ctx)
			}()
		}
		return errors.New("boom")
	})
	var pe *crashloop.ParkedError
	require.ErrorAs(t, err, &pe)
	return starts, pe, s
}

// RESTART_RESET=1 in the third failed start clears the respawn window: the
// key parks after three more respawns, not at the fourth start.
func TestResetRestartsClearsTheRespawnWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		starts, pe, _ := runResetting(t, 0, false)
		assert.Equal(t, 4, starts, "without a reset")
		assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)

		starts, pe, s := runResetting(t, 3, false)
		assert.Equal(t, 6, starts, "the reset run's failure is respawn 1 of a cleared window")
		assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
		assert.Equal(t, 3, pe.Attempts)
		assert.Equal(t, "w#2", s.Status(t.Context()).Keys["w"].Incarnation, "a reset starts the next incarnation")
	})
}

// A reset in a healthy run ends the chain of rescues: the crashes after it
// start a chain of their own.
func TestResetRestartsEndsTheChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		starts, pe, _ := runResetting(t, 0, true)
		assert.Equal(t, 4, starts, "without a reset")
		assert.Equal(t, crashloop.ReasonNeedsHuman, pe.Reason)

		starts, pe, _ = runResetting(t, 3, true)
		assert.Equal(t, 6, starts, "the reset run's crash is rescue 1 of a new chain")
		assert.Equal(t, crashloop.ReasonNeedsHuman, pe.Reason)
		assert.Equal(t, 3, pe.Attempts)
	})
}

// A goroutine that fn leaves behind and that resets after its run ended
// changes nothing.
func TestLateResetRestartsChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		starts, pe, s := runResetting(t, -1, false)
		assert.Equal(t, 4, starts)
		assert.Equal(t, crashloop.ReasonBudgetExhausted, pe.Reason)
		time.Sleep(time.Second) // let the last late reset run out
		assert.Equal(t, []string{"w"}, s.Parked())
	})
}
