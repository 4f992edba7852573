package crashloop

import (
	"context"
	"fmt"
	"log/slog"
)

// LogEvents returns an EventHandler that writes each event to l as one
// structured line: at ERROR for parks, trips and escalations, WARN for
// scheduled respawns, INFO for resumes and re-arms. Each line carries the
// attributes event (the kind's dotted name), key, and those of reason,
// attempts, limit, window, backoff, failing, total, incarnation and
// last_error that apply. A nil l means slog.Default(). The handler is safe
// for concurrent use if l's handler is (every slog handler of the standard
// library is).
func LogEvents(l *slog.Logger) EventHandler {
	if l == nil {
		l = slog.Default()
	}
	return EventHandlerFunc(func(ev Event) { logEvent(l, ev) })
}

func logEvent(l *slog.Logger, ev Event) {
	level, msg := slog.LevelInfo, ev.Kind.String()
	w := formatDuration(ev.Window)
	switch ev.Kind {
	case EventRespawnScheduled:
		level = slog.LevelWarn
		msg = fmt.Sprintf("session %q failed; respawn %d/%d in %s", ev.Key, ev.Attempts, ev.Limit, formatDuration(ev.Backoff))
	case EventStartupExhausted:
		level = slog.LevelError
		msg = fmt.Sprintf("session %q parked (%s, %d respawns in %s); it stays parked until an operator resumes it", ev.Key, ev.Reason, ev.Attempts, w)
	case EventResumed:
		msg = fmt.Sprintf("session %q resumed with a full respawn budget", ev.Key)
	case EventChainEscalated:
		level = slog.LevelError
		msg = fmt.Sprintf("%q %s; marked needs-human", ev.Key, ev.Reason)
	case EventGuardTripped:
		level = slog.LevelError
		msg = fmt.Sprintf("channel %q %s; halting auto-resume", ev.Key, ev.Reason)
	case EventFleetTripped:
		level = slog.LevelError
		msg = fmt.Sprintf("fleet crash-loop breaker TRIPPED: holding restarts (%d/%d failing, %d restarts in the hour, reason=%s); backing off for %s", ev.Failing, ev.Total, ev.Attempts, ev.Reason, w)
	case EventFleetRearmed:
		msg = "fleet crash-loop breaker re-armed after " + w + "; restarts proceed"
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
	add(ev.Incarnation != "", slog.String("incarnation", ev.Incarnation))
	add(ev.Reason != "", slog.String("reason", ev.Reason))
	add(ev.Attempts != 0, slog.Int("attempts", ev.Attempts))
	add(ev.Limit != 0, slog.Int("limit", ev.Limit))
	add(ev.Window != 0, slog.String("window", w))
	add(ev.Kind == EventRespawnScheduled, slog.String("backoff", formatDuration(ev.Backoff)))
	add(ev.Total != 0, slog.Int("failing", ev.Failing))
	add(ev.Total != 0, slog.Int("total", ev.Total))
	add(ev.LastError != nil, slog.Any("last_error", ev.LastError))
	r := slog.NewRecord(ev.Time, level, msg, 0) // stamped with the event's (injected) time
	r.AddAttrs(attrs...)
	_ = l.Handler().Handle(context.Background(), r)
}

// MultiHandler returns an EventHandler that passes each event to every
// handler of hs in order, skipping nil ones. It is as safe for concurrent
// use as the handlers it calls.
func MultiHandler(hs ...EventHandler) EventHandler {
	list := make([]EventHandler, 0, len(hs))
	for _, h := range hs {
		if h != nil {
			list = append(list, h)
		}
	}
	return multiHandler(list)
}

type multiHandler []EventHandler

func (m multiHandler) HandleEvent(ev Event) {
	for _, h := range m {
		h.HandleEvent(ev)
	}
}
