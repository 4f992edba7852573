package replay

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The MESSAGE_IDs of systemd's catalog that journald history is read from.
const (
	msgStarting         = "7d4958e842da4a758f6c1cdc7b36dcc5" // "Starting ...": a start job began
	msgStarted          = "39f53479d3a045ac8e11786248231fbf" // a unit started ("Started", "Finished" for a oneshot, "Reached target")
	msgProcessExit      = "98e322203f7a4ed290d09fe03c09fe15" // a unit's process exited: EXIT_CODE, EXIT_STATUS
	msgUnitFailed       = "d9b373ed55a64feb8242e02dbe79a49c" // a unit failed: UNIT_RESULT
	msgRestartScheduled = "5eb03494b6584870a536b337290809b3" // a unit's restart is scheduled: N_RESTARTS
	msgSuccess          = "7ad2d189f7e94e70a38c781354912448" // "Deactivated successfully" (systemd 248 and later): a clean end
	msgStopping         = "de5b426a63be47a7b6ac3eaac82e2f6f" // "Stopping ...": a stop job began (systemctl stop, restart)
	msgStopped          = "9d1aaa27d60140bd96365438aad20286" // "Stopped ...": a stop job ended
)

// journalIDs are the MESSAGE_IDs above.
var journalIDs = [...]string{msgStarting, msgStarted, msgProcessExit, msgUnitFailed, msgRestartScheduled, msgSuccess, msgStopping, msgStopped}

// The CODE_FUNC of systemd's messages that carry no MESSAGE_ID before
// systemd 240 (RHEL 8, Debian 10, Ubuntu 18.04).
const (
	funcProcessExit = "service_sigchld_event" // "Main process exited, code=..., status=...": EXIT_CODE, EXIT_STATUS
	funcUnitFailed  = "service_enter_dead"    // "Failed with result '...'." (UNIT_RESULT from 240 on)
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

// journalEntry is rawEntry for encoding/json: the line scanEntry leaves
// to it (a field as an array of bytes or of several values, escapes).
type journalEntry struct {
	MessageID      journalField `json:"MESSAGE_ID"`
	Unit           journalField `json:"UNIT"`
	UserUnit       journalField `json:"USER_UNIT"`
	Realtime       journalField `json:"__REALTIME_TIMESTAMP"`
	ExitCode       journalField `json:"EXIT_CODE"`
	ExitStatus     journalField `json:"EXIT_STATUS"`
	UnitResult     journalField `json:"UNIT_RESULT"`
	CodeFunc       journalField `json:"CODE_FUNC"`
	UID            journalField `json:"_UID"`
	Message        journalField `json:"MESSAGE"`
	Invocation     journalField `json:"INVOCATION_ID"`
	UserInvocation journalField `json:"USER_INVOCATION_ID"`
}

// decodeEntry reads the fields replay reads of the journal entry b: in one
// pass over the line (scanEntry) when it is as journalctl writes it, else
// with encoding/json.
func decodeEntry(b []byte, e *rawEntry) error {
	if scanEntry(b, e) && !(e.messageRaw && e.needsMessage()) {
		return nil
	}
	var j journalEntry
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = rawEntry{MessageID: []byte(j.MessageID), Unit: []byte(j.Unit), UserUnit: []byte(j.UserUnit), Realtime: []byte(j.Realtime),
		ExitCode: []byte(j.ExitCode), ExitStatus: []byte(j.ExitStatus), UnitResult: []byte(j.UnitResult),
		CodeFunc: []byte(j.CodeFunc), UID: []byte(j.UID), Message: []byte(j.Message),
		Invocation: []byte(j.Invocation), UserInvocation: []byte(j.UserInvocation)}
	return nil
}

// journald reads journalctl -o json (and -o json-pretty, whose entries the
// Reader joins into one line each). Only systemd's messages about a
// service's life are decoded; every other line (the units' own output) is
// skipped after a glance. A run is a service unit's: the same messages
// about targets, mounts, slices, sockets, timers and the like (systemd
// logs "Reached target" under Started's MESSAGE_ID) are not runs.
type journald struct {
	state map[string]keyRun // by key
}

// keyRun is what the reader knows of a key's run: its state and its
// INVOCATION_ID (systemd's id of one run of a unit), as a hash: a map
// value without pointers costs the collector nothing.
type keyRun struct {
	st  runState
	inv uint64 // 0: none
}

// runState is what a reader knows of a key's run.
type runState uint8

const (
	runUnknown runState = iota // the history has not shown the key yet
	runOpen                    // a run started and has not ended
	runEnded                   // the last run ended
	runStopped                 // the last run was stopped: its end is logged after
)

func newJournald() *journald { return &journald{state: make(map[string]keyRun)} }

var (
	messageIDKey  = []byte(`"MESSAGE_ID"`)
	servicePrefix = []byte("service_")
)

// invHash hashes an invocation id (FNV-1a, 64 bits; never 0 for one).
func invHash(id []byte) uint64 {
	if len(id) == 0 {
		return 0
	}
	h := uint64(14695981039346656037)
	for _, c := range id {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return max(h, 1)
}

// oldServiceFunc reports whether b names the CODE_FUNC of one of the
// messages systemd before 240 logs without a MESSAGE_ID: one scan of the
// line, as the glance for MESSAGE_ID is.
func oldServiceFunc(b []byte) bool {
	for {
		i := bytes.Index(b, servicePrefix)
		if i < 0 {
			return false
		}
		b = b[i:]
		if bytes.HasPrefix(b, []byte(funcProcessExit)) || bytes.HasPrefix(b, []byte(funcUnitFailed)) {
			return true
		}
		b = b[len(servicePrefix):]
	}
}

// oneOfOurs reports whether the line may be one of systemd's messages
// about a unit's life: whether its MESSAGE_ID is one of theirs, at a
// glance, or cannot be told at a glance (it is not a plain string right
// after the key), or, with no MESSAGE_ID, whether it may be a message of
// systemd before 240, which had none.
func oneOfOurs(b []byte) bool {
	i := bytes.Index(b, messageIDKey[1:]) // from the M: a quote is everywhere, the vector search stalls on each
	if i < 1 {
		return oldServiceFunc(b)
	}
	if b[i-1] != '"' {
		return true // a MESSAGE_ID" that is not the key: let the parser tell
	}
	v := b[i-1+len(messageIDKey):]
	if len(v) < 35 || string(v[:2]) != `:"` || v[34] != '"' {
		return true
	}
	switch string(v[2:34]) {
	case msgStarting, msgStarted, msgProcessExit, msgUnitFailed, msgRestartScheduled, msgSuccess, msgStopping, msgStopped:
		return true
	}
	return false
}

// needsMessage reports whether e's MESSAGE is read: for an entry of
// systemd before 240, which has no MESSAGE_ID, and for a failure without
// UNIT_RESULT (see unitResult).
func (e *rawEntry) needsMessage() bool {
	return len(e.MessageID) == 0 || (string(e.MessageID) == msgUnitFailed && len(e.UnitResult) == 0)
}

// kind tells which of systemd's messages e is ("" for none): its
// MESSAGE_ID, or for an entry of systemd before 240, which has none, the
// message its CODE_FUNC writes.
func (e *rawEntry) kind() string {
	if len(e.MessageID) != 0 {
		for _, id := range journalIDs {
			if string(e.MessageID) == id {
				return id
			}
		}
		return "other"
	}
	switch string(e.CodeFunc) {
	case funcProcessExit:
		if len(e.ExitCode) != 0 {
			return msgProcessExit
		}
	case funcUnitFailed:
		if bytes.Contains(e.Message, []byte("Failed with result")) {
			return msgUnitFailed
		}
	}
	return ""
}

// unitResult returns the unit's result: UNIT_RESULT, or before systemd 240
// the result its message names ("Failed with result 'exit-code'.").
func (e *rawEntry) unitResult() string {
	if len(e.UnitResult) != 0 {
		return string(e.UnitResult)
	}
	if _, rest, ok := strings.Cut(string(e.Message), "Failed with result '"); ok {
		if r, _, ok := strings.Cut(rest, "'"); ok {
			return r
		}
	}
	return "failed"
}

// service reports whether unit may be a service, the only units whose runs
// are a program's: whether its name ends in no other unit type.
func service(unit string) bool {
	i := strings.LastIndexByte(unit, '.')
	if i < 0 {
		return true
	}
	switch unit[i+1:] {
	case "target", "mount", "automount", "slice", "socket", "timer", "path", "device", "swap", "scope":
		return false
	}
	return true
}

func (j *journald) line(b []byte, n int, out *[]Record) error {
	if b[0] != '{' || b[len(b)-1] != '}' {
		return errors.New("not a JSON object (journalctl -o json writes one per line)")
	}
	if !oneOfOurs(b) {
		return nil // not one of systemd's messages: a unit's own output
	}
	var e rawEntry
	if err := decodeEntry(b, &e); err != nil {
		return err
	}
	kind := e.kind()
	switch kind {
	case msgStarting, msgStarted, msgProcessExit, msgUnitFailed, msgSuccess, msgStopping, msgStopped:
	default:
		return nil // the restart scheduled: the Started that follows says it; other messages
	}
	unit := string(e.Unit)
	key := unit
	if unit == "" {
		// A user manager's unit: the same name under two users is two units.
		unit = string(e.UserUnit)
		key = unit + " (user " + cmp.Or(string(e.UID), "?") + ")"
	}
	if unit == "" {
		return errors.New("no UNIT or USER_UNIT")
	}
	if !service(unit) {
		return nil // a target reached, a mount, a socket...: no program's run
	}
	us, err := strconv.ParseInt(string(e.Realtime), 10, 64)
	if err != nil || us <= 0 {
		return fmt.Errorf("__REALTIME_TIMESTAMP %q: not microseconds since the epoch", string(e.Realtime))
	}
	rec := Record{Time: time.UnixMicro(us).UTC(), Key: key, Line: n}
	kr := j.state[key]
	st := kr.st
	set := func(st runState) { j.state[key] = keyRun{st: st, inv: kr.inv} }
	switch kind {
	case msgStarting, msgStarted:
		id := e.Invocation
		if len(id) == 0 {
			id = e.UserInvocation // a user manager's unit
		}
		inv := invHash(id)
		if inv != 0 && inv == kr.inv {
			// The run this invocation began already: "Started" after
			// "Starting", or a oneshot's "Finished" after its end.
			return nil
		}
		rec.Event = Start
		j.state[key] = keyRun{st: runOpen, inv: inv}
	case msgProcessExit:
		code, failed, cause, err := journalExit(string(e.ExitCode), string(e.ExitStatus))
		if err != nil {
			return err
		}
		if st == runStopped {
			return nil // the end of a run stopped already
		}
		rec.Event, rec.Code, rec.Failed, rec.Cause = Exit, code, failed, cause
		set(runEnded)
	case msgUnitFailed:
		if st != runOpen {
			return nil // the process exit before it told the end; or start-limit-hit: no run
		}
		// A unit that failed with its run still open (a failed start of
		// the process, or a result without a process exit).
		rec.Event, rec.Code, rec.Failed, rec.Cause = Exit, -1, true, e.unitResult()
		set(runEnded)
	case msgSuccess:
		if st == runEnded || st == runStopped {
			return nil // the end told already (a process exit) or a stop's
		}
		// systemd 248 and later log a clean exit's status at debug level
		// only: "Deactivated successfully" is the end of the run.
		rec.Event, rec.Code, rec.Cause = Exit, 0, "deactivated successfully"
		set(runEnded)
	case msgStopping, msgStopped:
		if st != runOpen {
			return nil // systemd's own restart of a dead unit logs Stopped too
		}
		rec.Event, rec.Cause = Stop, "stopped (systemctl stop or restart)"
		set(runStopped)
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
