package share_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadLedger is the ledger of a replica that dies as its step's reply
// arrives: its steps apply, it hears no notice, and its claims never
// reach the ledger.
type deadLedger struct{ deafLedger }

var errDead = errors.New("the replica died")

func (deadLedger) Claim(context.Context, int64) (bool, error) { return false, errDead }

// parkedByTheDead parks key on a replica that dies before it claims the
// park, and returns the replica's recorder and the park.
func parkedByTheDead(t *testing.T, l share.Ledger, key string) (*recorder, *crashloop.ParkedError) {
	t.Helper()
	dead, rec := recordedOn(t, deadLedger{deafLedger{l}})
	var d crashloop.Decision
	for range 4 {
		d = dead.Decide(context.Background(), key, crashloop.RunResult{Err: errors.New("boom")})
	}
	var pe *crashloop.ParkedError
	require.ErrorAs(t, d.Err, &pe)
	return rec, pe
}

// wantParkEvent is the event that announces pe, a park of the default
// budget made at the bubble's start, as a replica that did not make it
// announces it.
func wantParkEvent(pe *crashloop.ParkedError) supEvent {
	b := crashloop.DefaultSupervisorConfig().Budget
	return supEvent{Event: crashloop.Event{Kind: crashloop.EventStartupExhausted, Key: pe.Key,
		Reason: pe.Reason, LastError: pe.LastError, Attempts: 3, Limit: b.MaxRespawns, Window: b.Window}}
}

// assertRefusedWith checks that d refuses with the park pe.
func assertRefusedWith(t *testing.T, d crashloop.Decision, pe *crashloop.ParkedError) {
	t.Helper()
	assert.Equal(t, crashloop.ActionStop, d.Action)
	var got *crashloop.ParkedError
	if assert.ErrorAs(t, d.Err, &got) {
		assert.Equal(t, [2]any{pe.Key, pe.Version}, [2]any{got.Key, got.Version})
	}
}

// A park whose maker died before it claimed it, and whose notice this
// replica never heard, is announced by the replica whose decision it
// refuses: it claims the park a second later, as from a notice, and
// announces it once.
func TestSharedJudgeRefusalClaimsThePark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ledgers := memoryReplicas(2)
		deadRec, pe := parkedByTheDead(t, ledgers[0], "k")
		s, rec := recordedOn(t, deafLedger{ledgers[1]})

		d := s.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("boom")})
		assertRefusedWith(t, d, pe)
		assert.Equal(t, []string{"k"}, s.Parked())
		synctest.Wait()
		assert.Empty(t, eventsOf(rec, crashloop.EventStartupExhausted), "nothing before the claim's grace")

		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []supEvent{wantParkEvent(pe)}, eventsOf(rec, crashloop.EventStartupExhausted))
		time.Sleep(time.Minute) // the dead replica's claims run out, and the refused one is not claimed again
		assert.Empty(t, eventsOf(deadRec, crashloop.EventStartupExhausted))
		assert.Len(t, eventsOf(rec, crashloop.EventStartupExhausted), 1, "announced once")
		d = s.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("boom")})
		assertRefusedWith(t, d, pe)
		time.Sleep(2 * time.Second)
		assert.Len(t, eventsOf(rec, crashloop.EventStartupExhausted), 1, "a refusal it knew is claimed no more")
	})
}

// A held restart that the ledger refuses for a park this replica had not
// learnt claims that park as from a notice, and announces it once.
func TestSharedProceedRefusalClaimsThePark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ledgers := memoryReplicas(2)
		s, rec := recordedOn(t, deafLedger{ledgers[1]})
		d := s.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("boom")})
		require.Equal(t, crashloop.ActionRestart, d.Action, "the key is known, not parked")
		deadRec, pe := parkedByTheDead(t, ledgers[0], "k")
		require.Empty(t, s.Parked(), "the notice was lost")

		d = s.Proceed(context.Background(), "k")
		assertRefusedWith(t, d, pe)
		assert.Equal(t, []string{"k"}, s.Parked())
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []supEvent{wantParkEvent(pe)}, eventsOf(rec, crashloop.EventStartupExhausted))
		time.Sleep(time.Minute)
		assert.Empty(t, eventsOf(deadRec, crashloop.EventStartupExhausted))
		assert.Len(t, eventsOf(rec, crashloop.EventStartupExhausted), 1, "announced once")
	})
}

// A Resume refused for a park this replica had not learnt (its own park
// resumed by an operator, the key parked again by a replica that died,
// both notices lost) claims that park as from a notice, and announces it
// once.
func TestSharedResumeRefusalClaimsThePark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ledgers := memoryReplicas(2)
		s, rec := recordedOn(t, deafLedger{ledgers[1]})
		for range 4 {
			s.Decide(context.Background(), "k", crashloop.RunResult{Err: errors.New("boom")})
		}
		require.Len(t, eventsOf(rec, crashloop.EventStartupExhausted), 1, "its own park")
		own, err := ledgers[0].Lookup(context.Background(), "k")
		require.NoError(t, err)
		_, _, err = ledgers[0].Resume(context.Background(), "k", own.Version, time.Now()) // an operator's
		require.NoError(t, err)
		deadRec, pe := parkedByTheDead(t, ledgers[0], "k")

		err = s.Resume(context.Background(), "k")
		var ce *share.ChangedError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, pe.Version, ce.Version)
		synctest.Wait()
		assert.Len(t, eventsOf(rec, crashloop.EventStartupExhausted), 1, "nothing before the claim's grace")
		time.Sleep(time.Second)
		synctest.Wait()
		evs := eventsOf(rec, crashloop.EventStartupExhausted)
		require.Len(t, evs, 2)
		assert.Equal(t, wantParkEvent(pe), evs[1])
		time.Sleep(time.Minute)
		assert.Empty(t, eventsOf(deadRec, crashloop.EventStartupExhausted))
		assert.Len(t, eventsOf(rec, crashloop.EventStartupExhausted), 2, "announced once")
	})
}
