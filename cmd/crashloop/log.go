//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// newLogger returns the logger of --log-format for stderr: slog's text or
// JSON lines. The library's events and crashloop's own messages during
// supervision go through it.
func newLogger(format string, stderr io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{ReplaceAttr: jsonAttr}))
	}
	return slog.New(slog.NewTextHandler(stderr, nil))
}

// jsonAttr writes an attribute of a JSON log line in crashloop's one
// schema (docs/schema/log.json): times as formatTime writes them, not
// slog's RFC 3339 with trailing zeros dropped; durations as Go duration
// strings, not integer nanoseconds; the fleet's counts of keys named keys.
func jsonAttr(groups []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindTime:
		return slog.String(a.Key, formatTime(a.Value.Time()))
	case slog.KindDuration:
		return slog.String(a.Key, a.Value.Duration().String())
	}
	if len(groups) == 0 {
		switch a.Key {
		case "failing":
			a.Key = "failing_keys"
		case "total":
			a.Key = "total_keys"
		}
	}
	return a
}

// output prints crashloop's one-line verdicts (an error, a refusal, giving
// up) on stderr: "crashloop: MESSAGE" lines, or, once --log-format json is
// known, JSON records like every other line.
type output struct {
	stderr io.Writer
	json   *slog.Logger // nil: plain lines
}

// print writes msg with attrs (which only the JSON record shows: a plain
// line says it all in msg).
func (o *output) print(level slog.Level, msg string, attrs ...any) {
	if o.json != nil {
		o.json.Log(context.Background(), level, msg, attrs...)
		return
	}
	fmt.Fprintf(o.stderr, "crashloop: %s\n", msg)
}

// stays is how the library's log line of a park ends: true of a park that
// a state file or Redis records.
const stays = "; it stays parked until an operator resumes it"

// forgottenPark is what a park's log line says instead of stays when
// nothing records the park (no --state, no --redis); http is true when a
// POST /resume can end it (--admin-token-file).
func forgottenPark(http bool) string {
	if http {
		return "; nothing records the park (no --state or --redis): it lasts until POST /resume or until this crashloop ends"
	}
	return "; nothing records the park (no --state or --redis): it ends with this crashloop, and the next one starts the program"
}

// parkNote is a slog.Handler that ends the library's log line of a park
// with note instead of stays.
type parkNote struct {
	slog.Handler
	note string
}

func (h parkNote) Handle(ctx context.Context, r slog.Record) error {
	if msg, ok := strings.CutSuffix(r.Message, stays); ok {
		nr := slog.NewRecord(r.Time, r.Level, msg+h.note, r.PC)
		r.Attrs(func(a slog.Attr) bool { nr.AddAttrs(a); return true })
		r = nr
	}
	return h.Handler.Handle(ctx, r)
}

func (h parkNote) WithAttrs(attrs []slog.Attr) slog.Handler {
	return parkNote{h.Handler.WithAttrs(attrs), h.note}
}

func (h parkNote) WithGroup(name string) slog.Handler {
	return parkNote{h.Handler.WithGroup(name), h.note}
}
