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

// journald reads journalctl -o json. Only the entries of systemd's four
// messages about a unit's life are decoded; every other line (the units'
// own output) is skipped after a glance.
type journald struct {
	open map[string]bool // keys whose run has started and not yet ended
}

func newJournald() *journald { return &journald{open: make(map[string]bool)} }

var messageIDKey = []byte(`"MESSAGE_ID"`)

func (j *journald) line(b []byte, n int, out *[]Record) error {
	if b[0] != '{' || b[len(b)-1] != '}' {
		return errors.New("not a JSON object (journalctl -o json writes one per line)")
	}
	if !bytes.Contains(b, messageIDKey) || !(bytes.Contains(b, []byte(msgStarted)) || bytes.Contains(b, []byte(msgProcessExit)) ||
		bytes.Contains(b, []byte(msgUnitFailed)) || bytes.Contains(b, []byte(msgRestartScheduled))) {
		return nil // not one of the four messages: a unit's own output
	}
	var e journalEntry
	if err := json.Unmarshal(b, &e); err != nil {
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
