package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The MESSAGE_IDs of systemd's catalog that journald history is read from.
const (
	msgStarted          = "39f53479d3a045ac8e11786248231fbf" // a unit started
	msgProcessExit      = "98e322203f7a4ed290d09fe03c09fe15" // a unit's process exited: EXIT_CODE, EXIT_STATUS
	msgUnitFailed       = "d9b373ed55a64feb8242e02dbe79a49c" // a unit failed: UNIT_RESULT
	msgRestartScheduled = "5eb03494b6584870a536b337290809b3" // a unit's restart is scheduled: N_RESTARTS
)

// journalField is a field of journalctl -o json: a string, an array of
// bytes (a value that is not text), or an array of those (a field that
// occurs several times; the first is kept).
type journalField string

// UnmarshalJSON reads a journal field in any of its three forms.
func (f *journalField) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		err := json.Unmarshal(b, &s)
		*f = journalField(s)
		return err
	case bytes.Equal(b, []byte("null")):
		*f = ""
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw) == 0 {
		*f = ""
		return nil
	}
	if raw[0][0] == '"' || raw[0][0] == '[' { // several values: the first
		return f.UnmarshalJSON(raw[0])
	}
	var bs []byte
	for _, r := range raw {
		n, err := strconv.ParseUint(string(r), 10, 8)
		if err != nil {
			return errors.New("a journal field that is neither text nor bytes")
		}
		bs = append(bs, byte(n))
	}
	*f = journalField(bs)
	return nil
}

// journalEntry is the part of a journal entry that replay reads.
type journalEntry struct {
	MessageID  journalField `json:"MESSAGE_ID"`
	Unit       journalField `json:"UNIT"`
	UserUnit   journalField `json:"USER_UNIT"`
	Realtime   journalField `json:"__REALTIME_TIMESTAMP"`
	ExitCode   journalField `json:"EXIT_CODE"`
	ExitStatus journalField `json:"EXIT_STATUS"`
	UnitResult journalField `json:"UNIT_RESULT"`
}

// plainEntry is journalEntry when every field it reads is a plain string,
// as systemd writes them: decoded without journalField's three forms.
type plainEntry struct {
	MessageID  string `json:"MESSAGE_ID"`
	Unit       string `json:"UNIT"`
	UserUnit   string `json:"USER_UNIT"`
	Realtime   string `json:"__REALTIME_TIMESTAMP"`
	ExitCode   string `json:"EXIT_CODE"`
	ExitStatus string `json:"EXIT_STATUS"`
	UnitResult string `json:"UNIT_RESULT"`
}

// journald reads journalctl -o json. Only the entries of systemd's four
// messages about a unit's life are decoded; every other line (the units'
// own output) is skipped after a glance.
type journald struct {
	open map[string]bool // keys whose run has started and not yet ended
}

func newJournald() *journald { return &journald{open: make(map[string]bool)} }

var messageIDKey = []byte(`"MESSAGE_ID"`)

// oneOfOurs reports whether the line may be one of the four messages:
// whether its MESSAGE_ID is one of theirs, at a glance, or cannot be told
// at a glance (it is not a plain string right after the key).
func oneOfOurs(b []byte) bool {
	i := bytes.Index(b, messageIDKey[1:]) // from the M: a quote is everywhere, the vector search stalls on each
	if i < 1 || b[i-1] != '"' {
		return i >= 1 // a MESSAGE_ID" that is not the key: let the parser tell
	}
	v := b[i-1+len(messageIDKey):]
	if len(v) < 35 || string(v[:2]) != `:"` || v[34] != '"' {
		return true
	}
	switch string(v[2:34]) {
	case msgStarted, msgProcessExit, msgUnitFailed, msgRestartScheduled:
		return true
	}
	return false
}

func (j *journald) line(b []byte, n int, out *[]Record) error {
	if b[0] != '{' || b[len(b)-1] != '}' {
		return errors.New("not a JSON object (journalctl -o json writes one per line)")
	}
	if !oneOfOurs(b) {
		return nil // not one of the four messages: a unit's own output
	}
	var e journalEntry
	if p := (plainEntry{}); json.Unmarshal(b, &p) == nil {
		e = journalEntry{journalField(p.MessageID), journalField(p.Unit), journalField(p.UserUnit),
			journalField(p.Realtime), journalField(p.ExitCode), journalField(p.ExitStatus), journalField(p.UnitResult)}
	} else if err := json.Unmarshal(b, &e); err != nil {
		return err
	}
	key := string(e.Unit)
	if key == "" {
		key = string(e.UserUnit)
	}
	switch string(e.MessageID) {
	case msgStarted, msgProcessExit, msgUnitFailed:
	case msgRestartScheduled:
		return nil // the Started that follows says it
	default:
		return nil
	}
	if key == "" {
		return errors.New("no UNIT or USER_UNIT")
	}
	us, err := strconv.ParseInt(string(e.Realtime), 10, 64)
	if err != nil || us <= 0 {
		return fmt.Errorf("__REALTIME_TIMESTAMP %q: not microseconds since the epoch", string(e.Realtime))
	}
	rec := Record{Time: time.UnixMicro(us).UTC(), Key: key, Line: n}
	switch string(e.MessageID) {
	case msgStarted:
		rec.Event = Start
		j.open[key] = true
	case msgProcessExit:
		code, failed, cause, err := journalExit(string(e.ExitCode), string(e.ExitStatus))
		if err != nil {
			return err
		}
		rec.Event, rec.Code, rec.Failed, rec.Cause = Exit, code, failed, cause
		delete(j.open, key)
	case msgUnitFailed:
		if !j.open[key] {
			return nil // the process exit before it told the end; or start-limit-hit: no run
		}
		// A unit that failed with its run still open (a failed start of
		// the process, or a result without a process exit).
		rec.Event, rec.Code, rec.Failed, rec.Cause = Exit, -1, true, string(e.UnitResult)
		delete(j.open, key)
	}
	*out = append(*out, rec)
	return nil
}

func (j *journald) end(*[]Record) {}

// journalExit reads EXIT_CODE and EXIT_STATUS.
func journalExit(code, status string) (int, bool, string, error) {
	switch code {
	case "exited":
		n, err := strconv.Atoi(status)
		if err != nil {
			return 0, false, "", fmt.Errorf("EXIT_STATUS %q: not a number", status)
		}
		return n, n != 0, exitCause(n), nil
	case "killed", "dumped":
		sig, ok := signalNumber(status)
		if !ok {
			return 0, false, "", fmt.Errorf("EXIT_STATUS %q: not a signal", status)
		}
		name := signalNames[sig]
		if name == "" {
			name = strconv.Itoa(sig)
		}
		cause := "killed by signal " + name
		if code == "dumped" {
			cause += " (core dumped)"
		}
		clean := code == "killed" && (sig == 1 || sig == 2 || sig == 15 || sig == 13) // systemd's clean signals
		return 128 + sig, !clean, cause, nil
	}
	return 0, false, "", fmt.Errorf("EXIT_CODE %q: not exited, killed or dumped", code)
}
