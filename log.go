package crashloop

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/crashloopguard/crashloop/internal/settings"
)

// LogEvents returns an EventHandler that writes each event to l as one
// structured line, stamped with the event's time: ERROR for parks, trips,
// escalations and a misconfigured store, WARN for restarts and an
// unreachable store, INFO for the rest. The message is a sentence for a
// human; the attributes (event, key, reason and the fields that apply) are
// for machines (docs/monitoring.md). A nil l means slog.Default(). It is
// safe for concurrent use if l's handler is.
func LogEvents(l *slog.Logger) EventHandler {
	if l == nil {
		l = slog.Default()
	}
	return EventHandlerFunc(func(ev Event) { logEvent(l, ev) })
}

func logEvent(l *slog.Logger, ev Event) {
	level, msg := slog.LevelInfo, ev.Kind.String()
	w := settings.FormatDuration(ev.Window)
	switch ev.Kind {
	case EventRespawnScheduled:
		level = slog.LevelWarn
		msg = fmt.Sprintf("key %q failed; respawn %d/%d %s", ev.Key, ev.Attempts, ev.Limit, when(ev))
	case EventRestartScheduled:
		if ev.Reason != ReasonCleanExit || ev.Held { // a clean exit is no trouble; a tripped breaker is
			level = slog.LevelWarn
		}
		msg = fmt.Sprintf("key %q %s; restart %d %s", ev.Key, restartWhy(ev.Reason), ev.Attempts, when(ev))
	case EventStartupExhausted:
		level = slog.LevelError
		why := ev.Reason
		if ev.Reason == ReasonBudgetExhausted {
			why += ", " + errtext.Plural(ev.Attempts, "respawn") + " in " + w
		}
		msg = fmt.Sprintf("key %q parked (%s); it stays parked until an operator resumes it", ev.Key, why)
	case EventResumed:
		msg = fmt.Sprintf("key %q resumed with a full respawn budget", ev.Key)
		if ev.Reason == ReasonProbe {
			msg = fmt.Sprintf("key %q resumed by a healthy probe, with a full respawn budget", ev.Key)
		}
	case EventChainEscalated:
		level = slog.LevelError
		msg = fmt.Sprintf("%q %s; marked needs-human until an operator resumes it", ev.Key, chainReason(ev.Attempts))
	case EventGuardTripped:
		level = slog.LevelError
		msg = fmt.Sprintf("key %q %s; halting auto-resume", ev.Key, guardWhy(ev))
	case EventFleetTripped:
		level = slog.LevelError
		msg = fmt.Sprintf("fleet crash-loop breaker TRIPPED: %s; holding restarts (%d/%d failing, %s in the hour); backing off for %s",
			fleetWhy(ev), ev.Failing, ev.Total, errtext.Plural(ev.Attempts, "restart"), w)
	case EventFleetRearmed:
		msg = "fleet crash-loop breaker re-armed after " + w + "; held restarts proceed"
	case EventFleetCauseHeld:
		level = slog.LevelError
		msg = fmt.Sprintf("%s failing with one cause; holding their restarts, one probe every %s: %s",
			errtext.Plural(ev.Attempts, "key"), w, ev.Cause)
	case EventFleetCauseReleased:
		msg = fmt.Sprintf("a probe was healthy; releasing %s held for: %s", errtext.Plural(ev.Attempts, "key"), ev.Cause)
	case EventStoreUnavailable:
		level = slog.LevelWarn
		msg = "shared store unavailable; guarding with this process's own state until it is back"
	case EventStoreMisconfigured:
		level = slog.LevelError
		msg = fmt.Sprintf("shared store misconfigured (%s); guarding with this process's own state until it is fixed", ev.Reason)
	case EventStoreRecovered:
		msg = fmt.Sprintf("shared store recovered; %s made alone written back", errtext.Plural(ev.Attempts, "decision"))
	case EventStoreStateLost:
		level = slog.LevelError
		msg = "shared store lost its state; writing back the parks this process knows"
	}
	if !l.Enabled(context.Background(), level) {
		return
	}
	attrs := []slog.Attr{slog.String("event", ev.Kind.String()), slog.String("key", ev.Key)}
	add := func(ok bool, a slog.Attr) {
		if ok {
			attrs = append(attrs, a)
		}
	}
	scheduled := ev.Kind == EventRespawnScheduled || ev.Kind == EventRestartScheduled
	add(ev.Incarnation != "", slog.String("incarnation", ev.Incarnation))
	add(ev.Reason != "", slog.String("reason", ev.Reason))
	add(ev.Attempts != 0, slog.Int("attempts", ev.Attempts))
	add(ev.Limit != 0, slog.Int("limit", ev.Limit))
	add(ev.Window != 0, slog.String("window", w))
	add(scheduled, slog.String("backoff", settings.FormatDuration(ev.Backoff)))
	add(ev.Held, slog.Bool("held", true))
	add(ev.Cause != "", slog.String("cause", ev.Cause))
	add(ev.Total != 0, slog.Int("failing", ev.Failing))
	add(ev.Total != 0, slog.Int("total", ev.Total))
	add(ev.LastError != nil, slog.Any("last_error", ev.LastError))
	if x, ok := errtext.ExitOf(ev.LastError); ok { // how the program ended, when the failure tells
		if x.ExitCode != nil {
			attrs = append(attrs, slog.Int("exit_code", *x.ExitCode))
		}
		add(x.Signal != "", slog.String("signal", x.Signal))
		add(x.StderrTail != "", slog.String("stderr_tail", x.StderrTail))
		add(x.OOMKilled, slog.Bool("oom_killed", true))
	}
	r := slog.NewRecord(ev.Time, level, msg, 0) // stamped with the event's (injected) time
	r.AddAttrs(attrs...)
	_ = l.Handler().Handle(context.Background(), r)
}

// when says when a scheduled restart goes: "in 500ms", "now", or "held by
// the fleet breaker for 2m".
func when(ev Event) string {
	switch {
	case ev.Held && ev.Cause != "":
		return "held for a shared cause; asks again in " + settings.FormatDuration(ev.Backoff)
	case ev.Held:
		return "held by the fleet breaker for " + settings.FormatDuration(ev.Backoff)
	case ev.Backoff == 0:
		return "now"
	}
	return "in " + settings.FormatDuration(ev.Backoff)
}

// restartWhy says what made a Supervisor restart a key no budget judged.
func restartWhy(reason string) string {
	switch reason {
	case ReasonCrashed:
		return "crashed after a healthy run"
	case ReasonPlanned:
		return "asked for a restart"
	case ReasonCleanExit:
		return "exited cleanly"
	case ReasonSharedCause:
		return "failed with a shared cause"
	}
	return reason
}

// guardWhy says which per-key guard tripped, with its limit and window:
// "crash-loop breaker tripped (>= 3 restarts in 60s)".
func guardWhy(ev Event) string {
	what := "crash-loop breaker tripped"
	switch ev.Reason {
	case ReasonRestartLoopGuard:
	case ReasonHourlyCap:
		what = "hourly restart cap reached"
	default:
		what = ev.Reason
	}
	return fmt.Sprintf("%s (>= %s in %s)", what, errtext.Plural(ev.Limit, "restart"), settings.FormatDuration(ev.Window))
}

// fleetWhy says why the fleet breaker tripped, with the numbers behind its
// reason code: "5/10 keys failing" or "40 restarts in 1h".
func fleetWhy(ev Event) string {
	switch ev.Reason {
	case ReasonFleetFailingFraction:
		return fmt.Sprintf("%d/%d keys failing", ev.Failing, ev.Total)
	case ReasonFleetRestartRate:
		return errtext.Plural(ev.Attempts, "restart") + " in " + settings.FormatDuration(fleetHour)
	}
	return ev.Reason
}
