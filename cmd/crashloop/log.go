//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

// newLogger returns the logger of --log-format for stderr: slog's text or
// JSON lines. The library's events and crashloop's own messages during
// supervision go through it.
func newLogger(format string, stderr io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(stderr, nil))
	}
	return slog.New(slog.NewTextHandler(stderr, nil))
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
