package crashloop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/crashloopguard/crashloop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logLines parses the JSON lines in buf.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func jsonLogger(buf *bytes.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: level}))
}

func TestLogEventsEachKind(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		ev   crashloop.Event
		want map[string]any
	}{
		{"respawn", crashloop.Event{Kind: crashloop.EventRespawnScheduled, Key: "worker", Time: t0, LastError: boom,
			Attempts: 2, Limit: 3, Window: 60 * time.Second, Backoff: time.Second},
			map[string]any{"level": "WARN", "msg": `key "worker" failed; respawn 2/3 in 1s`,
				"event": "agent.respawn_scheduled", "key": "worker", "attempts": 2.0, "limit": 3.0,
				"window": "60s", "backoff": "1s", "last_error": "boom"}},
		{"respawn without backoff", crashloop.Event{Kind: crashloop.EventRespawnScheduled, Key: "worker", Time: t0,
			Attempts: 1, Limit: 3, Window: 60 * time.Second},
			map[string]any{"level": "WARN", "msg": `key "worker" failed; respawn 1/3 now`,
				"event": "agent.respawn_scheduled", "key": "worker", "attempts": 1.0, "limit": 3.0,
				"window": "60s", "backoff": "0s"}},
		{"park", crashloop.Event{Kind: crashloop.EventStartupExhausted, Key: "worker", Time: t0, Reason: "respawn_budget_exhausted",
			LastError: boom, Attempts: 3, Limit: 3, Window: 60 * time.Second},
			map[string]any{"level": "ERROR",
				"msg":   `key "worker" parked (respawn_budget_exhausted, 3 respawns in 60s); it stays parked until an operator resumes it`,
				"event": "agent.startup_exhausted", "key": "worker", "reason": "respawn_budget_exhausted",
				"attempts": 3.0, "limit": 3.0, "window": "60s", "last_error": "boom"}},
		{"resume", crashloop.Event{Kind: crashloop.EventResumed, Key: "worker", Time: t0, Reason: "respawn_budget_exhausted",
			LastError: boom, Limit: 3, Window: 60 * time.Second},
			map[string]any{"level": "INFO", "msg": `key "worker" resumed with a full respawn budget`,
				"event": "agent.resumed", "key": "worker", "reason": "respawn_budget_exhausted",
				"limit": 3.0, "window": "60s", "last_error": "boom"}},
		{"escalation", crashloop.Event{Kind: crashloop.EventChainEscalated, Key: "seat-7", Incarnation: "pane-3/session-a", Time: t0,
			Reason: crashloop.ReasonNeedsHuman, Attempts: 3, Limit: 3, Window: 20 * time.Minute},
			map[string]any{"level": "ERROR", "msg": `"seat-7" crash-loop: gave up after 3 reactive rescues; marked needs-human until an operator resumes it`,
				"event": "rescue.needs_human", "key": "seat-7", "incarnation": "pane-3/session-a",
				"reason": "needs_human", "attempts": 3.0, "limit": 3.0, "window": "20m"}},
		{"guard", crashloop.Event{Kind: crashloop.EventGuardTripped, Key: "telegram", Time: t0,
			Reason: crashloop.ReasonRestartLoopGuard, Attempts: 3, Limit: 3, Window: 60 * time.Second},
			map[string]any{"level": "ERROR", "msg": `key "telegram" crash-loop breaker tripped (>= 3 restarts in 60s); halting auto-resume`,
				"event": "channel.crash_loop_tripped", "key": "telegram", "reason": "restart_loop_guard",
				"attempts": 3.0, "limit": 3.0, "window": "60s"}},
		{"hourly cap", crashloop.Event{Kind: crashloop.EventGuardTripped, Key: "bot", Time: t0, LastError: boom,
			Reason: crashloop.ReasonHourlyCap, Attempts: 10, Limit: 10, Window: time.Hour},
			map[string]any{"level": "ERROR", "msg": `key "bot" hourly restart cap reached (>= 10 restarts in 1h); halting auto-resume`,
				"event": "channel.crash_loop_tripped", "key": "bot", "reason": "hourly_restart_cap",
				"attempts": 10.0, "limit": 10.0, "window": "1h", "last_error": "boom"}},
		{"fleet trip", crashloop.Event{Kind: crashloop.EventFleetTripped, Key: "fleet", Time: t0,
			Reason: crashloop.ReasonFleetFailingFraction, Attempts: 12, Limit: 40, Window: 120 * time.Second, Failing: 5, Total: 10},
			map[string]any{"level": "ERROR",
				"msg":   "fleet crash-loop breaker TRIPPED: 5/10 keys failing; holding restarts (5/10 failing, 12 restarts in the hour); backing off for 120s",
				"event": "fleet.breaker_tripped", "key": "fleet", "reason": "fleet_failing_fraction",
				"attempts": 12.0, "limit": 40.0, "window": "120s", "failing": 5.0, "total": 10.0}},
		{"fleet trip on the rate", crashloop.Event{Kind: crashloop.EventFleetTripped, Key: "fleet", Time: t0,
			Reason: crashloop.ReasonFleetRestartRate, Attempts: 40, Limit: 40, Window: 120 * time.Second, Failing: 1, Total: 10},
			map[string]any{"level": "ERROR",
				"msg":   "fleet crash-loop breaker TRIPPED: 40 restarts in 1h; holding restarts (1/10 failing, 40 restarts in the hour); backing off for 120s",
				"event": "fleet.breaker_tripped", "key": "fleet", "reason": "fleet_restart_rate",
				"attempts": 40.0, "limit": 40.0, "window": "120s", "failing": 1.0, "total": 10.0}},
		{"fleet re-arm", crashloop.Event{Kind: crashloop.EventFleetRearmed, Key: "fleet", Time: t0,
			Reason: crashloop.ReasonFleetFailingFraction, Limit: 40, Window: 120 * time.Second, Total: 10},
			map[string]any{"level": "INFO", "msg": "fleet crash-loop breaker re-armed after 120s; held restarts proceed",
				"event": "fleet.breaker_rearmed", "key": "fleet", "reason": "fleet_failing_fraction",
				"limit": 40.0, "window": "120s", "failing": 0.0, "total": 10.0}},
		{"held respawn", crashloop.Event{Kind: crashloop.EventRespawnScheduled, Key: "worker", Time: t0, LastError: boom,
			Attempts: 1, Limit: 3, Window: 60 * time.Second, Backoff: 2 * time.Minute, Held: true},
			map[string]any{"level": "WARN", "msg": `key "worker" failed; respawn 1/3 held by the fleet breaker for 120s`,
				"event": "agent.respawn_scheduled", "key": "worker", "attempts": 1.0, "limit": 3.0,
				"window": "60s", "backoff": "120s", "held": true, "last_error": "boom"}},
		{"restart after a crash", crashloop.Event{Kind: crashloop.EventRestartScheduled, Key: "worker", Time: t0, Reason: "crashed",
			LastError: boom, Attempts: 7, Backoff: 500 * time.Millisecond},
			map[string]any{"level": "WARN", "msg": `key "worker" crashed after a healthy run; restart 7 in 500ms`,
				"event": "agent.restart_scheduled", "key": "worker", "reason": "crashed", "attempts": 7.0,
				"backoff": "500ms", "last_error": "boom"}},
		{"planned restart", crashloop.Event{Kind: crashloop.EventRestartScheduled, Key: "worker", Time: t0, Reason: "planned", Attempts: 1},
			map[string]any{"level": "WARN", "msg": `key "worker" asked for a restart; restart 1 now`,
				"event": "agent.restart_scheduled", "key": "worker", "reason": "planned", "attempts": 1.0, "backoff": "0s"}},
		{"clean exit", crashloop.Event{Kind: crashloop.EventRestartScheduled, Key: "worker", Time: t0, Reason: "clean_exit", Attempts: 3},
			map[string]any{"level": "INFO", "msg": `key "worker" exited cleanly; restart 3 now`,
				"event": "agent.restart_scheduled", "key": "worker", "reason": "clean_exit", "attempts": 3.0, "backoff": "0s"}},
		{"clean exit held", crashloop.Event{Kind: crashloop.EventRestartScheduled, Key: "worker", Time: t0, Reason: "clean_exit",
			Attempts: 2, Backoff: 90 * time.Second, Held: true},
			map[string]any{"level": "WARN", "msg": `key "worker" exited cleanly; restart 2 held by the fleet breaker for 90s`,
				"event": "agent.restart_scheduled", "key": "worker", "reason": "clean_exit", "attempts": 2.0,
				"backoff": "90s", "held": true}},
		{"permanent park", crashloop.Event{Kind: crashloop.EventStartupExhausted, Key: "worker", Time: t0, Reason: "permanent_error",
			LastError: boom, Limit: 3, Window: 60 * time.Second},
			map[string]any{"level": "ERROR", "msg": `key "worker" parked (permanent_error); it stays parked until an operator resumes it`,
				"event": "agent.startup_exhausted", "key": "worker", "reason": "permanent_error", "limit": 3.0, "window": "60s",
				"last_error": "boom"}},
		{"store unavailable", crashloop.Event{Kind: crashloop.EventStoreUnavailable, Key: "redis", Time: t0, LastError: boom},
			map[string]any{"level": "WARN", "msg": "shared store unavailable; guarding with this process's own state until it is back",
				"event": "store.unavailable", "key": "redis", "last_error": "boom"}},
		{"store recovered", crashloop.Event{Kind: crashloop.EventStoreRecovered, Key: "redis", Time: t0, Attempts: 1},
			map[string]any{"level": "INFO", "msg": "shared store recovered; 1 decision made alone written back",
				"event": "store.recovered", "key": "redis", "attempts": 1.0}},
		{"store state lost", crashloop.Event{Kind: crashloop.EventStoreStateLost, Key: "store", Time: t0},
			map[string]any{"level": "ERROR", "msg": "shared store lost its state; writing back the parks this process knows",
				"event": "store.state_lost", "key": "store"}},
		{"store misconfigured", crashloop.Event{Kind: crashloop.EventStoreMisconfigured, Key: "store", Time: t0, Reason: "noperm", LastError: boom},
			map[string]any{"level": "ERROR", "msg": "shared store misconfigured (noperm); guarding with this process's own state until it is fixed",
				"event": "store.misconfigured", "key": "store", "reason": "noperm", "last_error": "boom"}},
		{"unknown kind", crashloop.Event{Kind: crashloop.EventKind(99), Key: "k", Time: t0},
			map[string]any{"level": "INFO", "msg": "EventKind(99)", "event": "EventKind(99)", "key": "k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			crashloop.LogEvents(jsonLogger(&buf, slog.LevelDebug)).HandleEvent(tc.ev)
			lines := logLines(t, &buf)
			require.Len(t, lines, 1, "one line per event")
			tc.want["time"] = "2000-01-01T00:00:00Z" // the event's own time
			assert.Equal(t, tc.want, lines[0])
		})
	}
}

func TestLogEventsLevelFilter(t *testing.T) {
	var buf bytes.Buffer
	h := crashloop.LogEvents(jsonLogger(&buf, slog.LevelWarn))
	for _, k := range []crashloop.EventKind{crashloop.EventRespawnScheduled, crashloop.EventResumed,
		crashloop.EventFleetRearmed, crashloop.EventStartupExhausted} {
		h.HandleEvent(crashloop.Event{Kind: k, Key: "k", Time: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)})
	}
	var levels []any
	for _, l := range logLines(t, &buf) {
		levels = append(levels, l["level"])
	}
	assert.Equal(t, []any{"WARN", "ERROR"}, levels, "INFO lines dropped at WARN")
}

func TestLogEventsFromRealGuards(t *testing.T) {
	t.Run("restart loop guard", func(t *testing.T) {
		var buf bytes.Buffer
		mock := clock.NewMock()
		g, err := crashloop.NewRestartLoopGuard(3, 60*time.Second, crashloop.WithClock(mock), crashloop.WithName("telegram"),
			crashloop.WithEventHandler(crashloop.LogEvents(jsonLogger(&buf, slog.LevelInfo))))
		require.NoError(t, err)
		assert.False(t, g.Record())
		mock.Add(10 * time.Second)
		assert.False(t, g.Record())
		mock.Add(10 * time.Second)
		assert.True(t, g.Record())
		lines := logLines(t, &buf)
		require.Len(t, lines, 1)
		assert.Equal(t, `key "telegram" crash-loop breaker tripped (>= 3 restarts in 60s); halting auto-resume`, lines[0]["msg"])
		assert.Equal(t, "ERROR", lines[0]["level"])
		assert.Equal(t, mock.Now().UTC().Format(time.RFC3339Nano), parseLogTime(t, lines[0]).UTC().Format(time.RFC3339Nano))
	})
	t.Run("supervisor", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var buf bytes.Buffer
			s := newTestSupervisor(t, crashloop.DefaultSupervisorConfig(),
				crashloop.WithEventHandler(crashloop.LogEvents(jsonLogger(&buf, slog.LevelInfo))))
			err := s.Run(t.Context(), "importer", func(context.Context) error { return errors.New("db down") })
			require.ErrorIs(t, err, crashloop.ErrParked)
			var msgs []any
			for _, l := range logLines(t, &buf) {
				msgs = append(msgs, l["msg"])
			}
			assert.Equal(t, []any{
				`key "importer" failed; respawn 1/3 in 500ms`,
				`key "importer" failed; respawn 2/3 in 1s`,
				`key "importer" failed; respawn 3/3 in 1.5s`,
				`key "importer" parked (respawn_budget_exhausted, 3 respawns in 60s); it stays parked until an operator resumes it`,
			}, msgs)
		})
	})
}

func parseLogTime(t *testing.T, line map[string]any) time.Time {
	t.Helper()
	s, ok := line["time"].(string)
	require.True(t, ok, "time attribute")
	at, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return at
}

func TestMultiHandler(t *testing.T) {
	var order []string
	named := func(name string) crashloop.EventHandler {
		return crashloop.EventHandlerFunc(func(ev crashloop.Event) { order = append(order, name+":"+ev.Key) })
	}
	h := crashloop.MultiHandler(nil, named("a"), nil, named("b"), named("c"), nil)
	h.HandleEvent(crashloop.Event{Kind: crashloop.EventResumed, Key: "k1"})
	h.HandleEvent(crashloop.Event{Kind: crashloop.EventResumed, Key: "k2"})
	assert.Equal(t, []string{"a:k1", "b:k1", "c:k1", "a:k2", "b:k2", "c:k2"}, order)

	// Nothing to call, and no panic.
	crashloop.MultiHandler().HandleEvent(crashloop.Event{Kind: crashloop.EventResumed})
	crashloop.MultiHandler(nil, nil).HandleEvent(crashloop.Event{Kind: crashloop.EventResumed})

	// Nested, and combined with LogEvents.
	order = nil
	var buf bytes.Buffer
	nested := crashloop.MultiHandler(crashloop.MultiHandler(named("x")), crashloop.LogEvents(jsonLogger(&buf, slog.LevelInfo)), named("y"))
	nested.HandleEvent(crashloop.Event{Kind: crashloop.EventResumed, Key: "k", Time: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)})
	assert.Equal(t, []string{"x:k", "y:k"}, order)
	assert.Len(t, logLines(t, &buf), 1)

	// The list is copied: changing the caller's slice later changes nothing.
	order = nil
	hs := []crashloop.EventHandler{named("p"), named("q")}
	m := crashloop.MultiHandler(hs...)
	hs[0] = named("changed")
	m.HandleEvent(crashloop.Event{Key: "k"})
	assert.Equal(t, []string{"p:k", "q:k"}, order)
}
