//go:build unix

package main

import (
	"encoding/json"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
)

// The JSON documents crashloop writes share one schema (crashloop help
// json; docs/schema/ holds a JSON Schema of each): snake_case names,
// durations as Go duration strings, times as RFC 3339 in UTC with nine
// fractional digits, absent values left out, counts of keys named keys,
// and a park as one object (parkDoc) everywhere.

// timeLayout is RFC 3339 with nine fractional digits, always: every time
// crashloop writes has one precision, whether it was read from the clock
// (nanoseconds) or from Redis (microseconds).
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// formatTime writes t as every JSON document of crashloop does.
func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// jsonTime is a time.Time that marshals as formatTime writes it.
type jsonTime time.Time

func (t jsonTime) MarshalJSON() ([]byte, error) { return json.Marshal(formatTime(time.Time(t))) }

// jsonDuration is a time.Duration that marshals as a Go duration string.
type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// parkDoc is a park, the same object in every document: the key, the
// reason code, when it was parked, what the guard that parked it counted
// (respawns, rescues or restarts, of every replica on Redis), the last
// error, how the last run ended when it is known (the exit status of a
// program that exited, the signal that killed one, the end of its
// stderr, whether the kernel's OOM killer killed it), and when its next
// probe is due (--probe-after). ExitCode, Signal, StderrTail, OOMKilled
// and NextProbe are left out when unknown (or false, or none).
type parkDoc struct {
	Key        string    `json:"key"`
	Reason     string    `json:"reason"`
	Since      jsonTime  `json:"since"`
	Attempts   int       `json:"attempts"`
	LastError  string    `json:"last_error,omitempty"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	Signal     string    `json:"signal,omitempty"`
	StderrTail string    `json:"stderr_tail,omitempty"`
	OOMKilled  bool      `json:"oom_killed,omitempty"`
	NextProbe  *jsonTime `json:"next_probe,omitempty"`
}

// setProbe sets when the park's next probe is due; a zero next is none.
func (p *parkDoc) setProbe(next time.Time) {
	p.NextProbe = nil
	if !next.IsZero() {
		at := jsonTime(next)
		p.NextProbe = &at
	}
}

// parkOf returns the park of pe as parkDoc, with how the program ended
// when its last error tells (errtext.Exiter: a run's failure, of this
// crashloop or, through Redis, of another replica).
func parkOf(pe *crashloop.ParkedError) parkDoc {
	p := parkDoc{Key: pe.Key, Reason: pe.Reason, Since: jsonTime(pe.Since), Attempts: pe.Attempts}
	if pe.LastError != nil {
		p.LastError = pe.LastError.Error()
	}
	if x, ok := errtext.ExitOf(pe.LastError); ok {
		p.setExit(x)
	}
	return p
}

// setExit sets how the program ended: its exit status or signal, and its
// stderr tail.
func (p *parkDoc) setExit(x errtext.Exit) {
	p.ExitCode, p.Signal, p.StderrTail, p.OOMKilled = x.ExitCode, x.Signal, x.StderrTail, x.OOMKilled
}

// exit returns how the program ended, as the park tells it.
func (p parkDoc) exit() errtext.Exit {
	return errtext.Exit{ExitCode: p.ExitCode, Signal: p.Signal, StderrTail: p.StderrTail, OOMKilled: p.OOMKilled}
}

// fleetDoc is the fleet breaker: tripped or armed, its limit of restarts
// per hour and the restarts in the last hour, the keys failing out of all
// the keys it has heard of, when a tripped breaker re-arms, and the shared
// causes it holds restarts for (fleet.shared_cause in --config).
type fleetDoc struct {
	BreakerTripped  bool      `json:"breaker_tripped"`
	RestartsPerHour int       `json:"restarts_per_hour"`
	RestartsInHour  int       `json:"restarts_in_hour"`
	FailingKeys     int       `json:"failing_keys"`
	TotalKeys       int       `json:"total_keys"`
	RearmAt         *jsonTime `json:"rearm_at,omitempty"`
	HeldCauses      []string  `json:"held_causes,omitempty"`
}

// fleetOf returns fs as fleetDoc.
func fleetOf(fs crashloop.FleetStatus) *fleetDoc {
	f := &fleetDoc{BreakerTripped: fs.BreakerTripped, RestartsPerHour: fs.FleetRestartsPerHour, RestartsInHour: fs.RestartsInHour,
		FailingKeys: fs.FailingKeys, TotalKeys: fs.Keys, HeldCauses: fs.HeldCauses}
	if fs.RearmAt != nil {
		at := jsonTime(*fs.RearmAt)
		f.RearmAt = &at
	}
	return f
}

// parkedDoc is the document of crashloop status --json
// (docs/schema/status.json): what is parked in a state file or on Redis,
// sorted by key, and on Redis the fleet breaker.
type parkedDoc struct {
	Source string    `json:"source"`           // "state" or "redis"
	Where  string    `json:"where"`            // the state file, or the Redis URL without its password
	Prefix string    `json:"prefix,omitempty"` // --redis-prefix
	Parks  []parkDoc `json:"parks"`
	Fleet  *fleetDoc `json:"fleet,omitempty"`
}

// liveDoc is the document of GET /status (docs/schema/live.json): every
// key the Supervisor knows, sorted, the fleet breaker when it is on, the
// program's last sd_notify STATUS= text, and with --health-cmd the health
// of the run under way.
type liveDoc struct {
	Keys          []liveKeyDoc  `json:"keys"`
	Fleet         *fleetDoc     `json:"fleet,omitempty"`
	ProgramStatus string        `json:"program_status,omitempty"`
	Health        *healthStatus `json:"health,omitempty"`
}

// liveKeyDoc is a key in liveDoc: what the Supervisor is doing with it and
// since when, its restarts since it was first run or last resumed (of
// every replica on Redis: total_restarts; of this one: local_restarts),
// whether it may restart, its last error with how the program ended when
// that error tells (exit_code or signal, and stderr_tail), its park when
// it is parked, and the shared cause the fleet holds its restart for.
type liveKeyDoc struct {
	Key           string   `json:"key"`
	State         string   `json:"state"`
	Since         jsonTime `json:"since"`
	TotalRestarts int      `json:"total_restarts"`
	LocalRestarts int      `json:"local_restarts"`
	CanRestart    bool     `json:"can_restart"`
	Incarnation   string   `json:"incarnation,omitempty"`
	LastError     string   `json:"last_error,omitempty"`
	ExitCode      *int     `json:"exit_code,omitempty"`
	Signal        string   `json:"signal,omitempty"`
	StderrTail    string   `json:"stderr_tail,omitempty"`
	Park          *parkDoc `json:"park,omitempty"`
	Cause         string   `json:"cause,omitempty"`
}

// attrs returns the park's fields as the attributes of a log line, then
// more.
func (p parkDoc) attrs(more ...any) []any {
	a := []any{"key", p.Key, "reason", p.Reason, "since", time.Time(p.Since), "attempts", p.Attempts}
	if p.LastError != "" {
		a = append(a, "last_error", p.LastError)
	}
	if p.ExitCode != nil {
		a = append(a, "exit_code", *p.ExitCode)
	}
	if p.Signal != "" {
		a = append(a, "signal", p.Signal)
	}
	if p.StderrTail != "" {
		a = append(a, "stderr_tail", p.StderrTail)
	}
	if p.OOMKilled {
		a = append(a, "oom_killed", true)
	}
	if p.NextProbe != nil {
		a = append(a, "next_probe", time.Time(*p.NextProbe))
	}
	return append(a, more...)
}
