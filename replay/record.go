package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Event is what a Record says happened to a key. The zero value is not an
// event a Reader returns; String returns "start", "exit", "ready" or
// "resume".
type Event int

// The events of a Record.
const (
	// Start: a run of the key started.
	Start Event = iota + 1
	// Exit: the run of the key ended (Record.Code, Record.Failed).
	Exit
	// Ready: the run under way proved it was up and healthy (like sd_notify
	// READY=1).
	Ready
	// Resume: an operator resumed the key: a park before it was lifted by
	// hand, so a later healthy run is no sign of a false park.
	Resume
	// Stop: an operator stopped the run under way (systemctl stop,
	// docker stop, a deleted pod). It is no failure and asks for no
	// decision, and the next start is the operator's, not a restart.
	Stop
)

var eventNames = [...]string{Start: "start", Exit: "exit", Ready: "ready", Resume: "resume", Stop: "stop"}

// String returns the event's name as the plain formats write it.
func (e Event) String() string {
	if e > 0 && int(e) < len(eventNames) {
		return eventNames[e]
	}
	return "Event(" + strconv.Itoa(int(e)) + ")"
}

// parseEvent reads an event's name.
func parseEvent(s string) (Event, bool) {
	for e, name := range eventNames {
		if name != "" && name == s {
			return Event(e), true
		}
	}
	return 0, false
}

// Record is one thing that happened to a key, as a Reader returns it. It is
// a plain value; its zero value is not a record a Reader returns.
type Record struct {
	Time  time.Time
	Key   string
	Event Event
	// Code is an Exit's status as a shell reports it: the exit status, or
	// 128+N when signal N ended the run; -1 when the history does not say.
	Code int
	// Failed reports that an Exit was a failure: a status other than 0, a
	// signal (systemd's clean ones, HUP, INT, TERM and PIPE, excepted in
	// journald history), or a failure the history names (watchdog,
	// oom-kill).
	Failed bool
	// Permanent reports that the history says this Exit parks at once
	// (crashloop's "permanent_error").
	Permanent bool
	// Cause says how an Exit ended, in the history's words, e.g. "exited
	// with status 1", "killed by signal KILL", "oom-kill".
	Cause string
	// Line is the line (for a Kubernetes list, the item, from 1) the record
	// was read from.
	Line int
	// Inferred reports that Time is inferred, not read: an occurrence of an
	// aggregated Kubernetes event (count N over firstTimestamp to
	// lastTimestamp) placed with kubelet's doubling back-off spacing.
	Inferred bool
	// Counted is, for a Kubernetes container, the restarts kubelet counted
	// (restartCount) and a Pod reported with this record; 0 otherwise. It
	// says how many restarts happened that the history does not show.
	Counted int
	// Logged is, for crashloop's own log, the decision the log recorded
	// for this Exit; nil otherwise.
	Logged *Logged
}

// Logged is a decision crashloop's own log recorded for a run's end. It is
// a plain value.
type Logged struct {
	Event  string        // the event's dotted name, e.g. "agent.respawn_scheduled"
	Action string        // "restart", "hold" or "stop"
	Wait   time.Duration // the logged backoff (restart, hold)
	Reason string        // the park's reason code (stop), e.g. "needs_human"
}

// Format is a history format. The zero value, FormatAuto, detects the
// format from the content; String returns the names ParseFormat reads.
type Format int

// The formats a Reader reads.
const (
	// FormatAuto detects the format from the first line.
	FormatAuto Format = iota
	// FormatJournald is the output of journalctl -o json or -o
	// json-pretty, of one or many units.
	FormatJournald
	// FormatKubernetes is the output of kubectl get events -o json or
	// kubectl get pods -o json (a List; each item is an Event or a Pod),
	// kubectl get pod NAME -o json (one Pod), or a stream of Event objects
	// one after another (a kube event exporter's log).
	FormatKubernetes
	// FormatDocker is the output of docker events --format '{{json .}}',
	// of daemons since API 1.22 (Type, Action, Actor) and before (status,
	// id, from, time).
	FormatDocker
	// FormatCrashloop is crashloop's own --log-format json output, with
	// the supervised program's lines (it shares stderr) among crashloop's.
	FormatCrashloop
	// FormatCSV is the plain CSV form: time,key,event,code.
	FormatCSV
	// FormatJSONLines is the plain JSON-lines form: {"time", "key",
	// "event", "code"}.
	FormatJSONLines
)

var formatNames = [...]string{FormatAuto: "auto", FormatJournald: "journald", FormatKubernetes: "kubernetes",
	FormatDocker: "docker", FormatCrashloop: "crashloop", FormatCSV: "csv", FormatJSONLines: "jsonl"}

// String returns the format's name.
func (f Format) String() string {
	if f >= 0 && int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// ParseFormat reads a format's name: auto, journald, kubernetes, docker,
// crashloop, csv or jsonl.
func ParseFormat(s string) (Format, error) {
	for f, name := range formatNames {
		if name == s {
			return Format(f), nil
		}
	}
	return 0, fmt.Errorf("replay: unknown format %q (auto, journald, kubernetes, docker, crashloop, csv or jsonl)", s)
}

// LineError is a line of history a Reader could not read. It is counted
// and reported; it never stops the reading.
type LineError struct {
	Source string // the Reader's name
	Line   int
	Err    error
}

// Error returns "SOURCE:LINE: ERR".
func (e *LineError) Error() string {
	return e.Source + ":" + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *LineError) Unwrap() error { return e.Err }

// ErrNoHistory is returned (wrapped, naming the source) when a history has
// lines but not one of them could be read.
var ErrNoHistory = errors.New("replay: no record could be read")

// maxLine is the longest line a Reader reads; a longer one is malformed.
const maxLine = 16 << 20

// keepErrors is how many LineErrors a Reader keeps; it counts them all.
const keepErrors = 20

// parser turns the lines of one format into records.
type parser interface {
	// line reads one line (without its newline), adding what it says to
	// out. It returns an error for a malformed line.
	line(b []byte, n int, out *[]Record) error
	// end adds what the end of the history completes.
	end(out *[]Record)
}

// Reader reads the records of one history, in the order the history holds
// them (see Replay for out-of-order records). It keeps state per key,
// never per record. A Reader is not safe for concurrent use; its zero value
// is not usable: create one with NewReader.
type Reader struct {
	name    string
	src     *bufio.Reader
	format  Format
	p       parser
	kube    *kubeReader
	pending []Record
	line    int
	lines   int // lines that were not blank
	read    int // records returned
	bad     int
	errs    []*LineError
	done    bool
	err     error
	other   int          // lines that are not the format's (the program's own, in crashloop's log)
	unknown []*LineError // lines before the format was told, while it could not be
	nunk    int
	pretty  []byte // the entry of journalctl -o json-pretty being joined
	prettyN int    // its first line
	// prettySkip: the entry being joined was too long; its lines are
	// dropped to its closing "}".
	prettySkip bool
}

// NewReader returns a Reader of r, named name in errors (a file name, say).
// format FormatAuto detects the format from the first line that is not
// blank.
func NewReader(r io.Reader, name string, format Format) *Reader {
	return &Reader{name: name, src: bufio.NewReaderSize(r, 1<<16), format: format}
}

// Format returns the format of the history: the one detected once the
// first record was read, else the one NewReader was given.
func (r *Reader) Format() Format { return r.format }

// Malformed returns how many lines could not be read, and the first few
// of them (at most 20) with their line numbers.
func (r *Reader) Malformed() (int, []*LineError) { return r.bad, r.errs }

// Lines returns how many lines that were not blank the Reader has read.
func (r *Reader) Lines() int { return r.lines }

// Other returns how many lines were not the format's records nor
// malformed: the supervised program's own lines in crashloop's log.
func (r *Reader) Other() int { return r.other }

// Next returns the next record, or io.EOF after the last one. A line it
// cannot read is counted (see Malformed) and skipped. It returns an error
// wrapping ErrNoHistory when the history had lines but none could be read,
// and the error of the underlying reader if reading failed.
func (r *Reader) Next() (Record, error) {
	for len(r.pending) == 0 {
		if r.done {
			return Record{}, r.err
		}
		r.fill()
	}
	rec := r.pending[0]
	r.pending = r.pending[1:]
	r.read++
	return rec, nil
}

// fill reads lines until one gives records or the history ends.
func (r *Reader) fill() {
	r.pending = r.pending[:0]
	if r.kube != nil {
		r.kube.next(r)
		return
	}
	for len(r.pending) == 0 {
		b, err := r.readLine()
		if len(b) > 0 {
			r.parse(b)
		}
		if r.kube != nil {
			r.kube.next(r)
			return
		}
		if err != nil {
			if r.p != nil {
				r.p.end(&r.pending)
			}
			r.finish(err)
			return
		}
	}
}

// finish ends the reading with the reader's error err (io.EOF: none).
func (r *Reader) finish(err error) {
	r.done = true
	r.settle()
	switch {
	case err != io.EOF:
		r.err = fmt.Errorf("replay: %s: %w", r.name, err)
	case r.read == 0 && len(r.pending) == 0 && r.bad > 0:
		r.err = fmt.Errorf("%w from %s: %d malformed lines, the first: %v", ErrNoHistory, r.name, r.bad, r.errs[0])
	default:
		r.err = io.EOF
	}
}

// readLine returns the next line without its newline (longer lines than
// maxLine are cut, and reported as malformed by the parser).
func (r *Reader) readLine() ([]byte, error) {
	b, err := r.src.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		long := append([]byte(nil), b...)
		for err == bufio.ErrBufferFull {
			b, err = r.src.ReadSlice('\n')
			if len(long) <= maxLine { // beyond maxLine: enough to tell the line is too long
				long = append(long, b...)
			}
		}
		b = long
	}
	r.line++
	b = bytes.TrimRight(b, "\r\n")
	if err == io.EOF && len(b) == 0 {
		r.line--
	}
	return b, err
}

// parse reads one line, detecting the format on the first one that tells
// it.
func (r *Reader) parse(b []byte) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return
	}
	r.lines++
	if r.p == nil && r.kube == nil {
		// The line is the reader's buffer, which a look ahead overwrites.
		b = append([]byte(nil), b...)
		t = bytes.TrimSpace(b)
		if r.format == FormatAuto {
			r.format = detect(t)
			if r.format == FormatAuto || (r.format == FormatCSV && !plainCSV(t, r.line)) {
				// Not a format's line (a program's own line before
				// crashloop's first): the lines after it will tell.
				r.format = FormatAuto
				r.nunk++
				if len(r.unknown) < keepErrors {
					r.unknown = append(r.unknown, &LineError{Source: r.name, Line: r.line, Err: errUnknownFormat})
				}
				return
			}
			if r.format == FormatKubernetes && string(t) == "{" && r.journalPretty() {
				r.format = FormatJournald
			}
		}
		r.settle()
		if r.format == FormatKubernetes {
			// A List, a Pod or Events: JSON documents, read item by item from this line on.
			rest := io.MultiReader(bytes.NewReader(append(b, '\n')), r.src)
			r.kube = newKubeReader(rest, r.line)
			return
		}
		r.p = newParser(r.format)
	}
	if r.prettySkip {
		// The rest of an entry too long to read, reported already.
		r.prettySkip = string(t) != "}"
		return
	}
	if r.format == FormatJournald && (r.pretty != nil || string(t) == "{") {
		// journalctl -o json-pretty: an entry over many lines, "{" to "}".
		if r.pretty == nil {
			r.pretty, r.prettyN = make([]byte, 0, 4096), r.line
		}
		if len(r.pretty)+len(t) > maxLine {
			r.malformed(r.prettyN, fmt.Errorf("entry longer than %d bytes", maxLine))
			r.pretty, r.prettySkip = nil, string(t) != "}"
			return
		}
		r.pretty = append(r.pretty, t...)
		if string(t) != "}" {
			return
		}
		t, r.pretty = r.pretty, nil
		if err := r.p.line(t, r.prettyN, &r.pending); err != nil {
			r.malformed(r.prettyN, err)
		}
		return
	}
	if len(t) > maxLine {
		r.malformed(r.line, fmt.Errorf("line longer than %d bytes", maxLine))
		return
	}
	switch err := r.p.line(t, r.line, &r.pending); {
	case err == errOther:
		r.other++
	case err != nil:
		r.malformed(r.line, err)
	}
}

// settle accounts for the lines read before the format was told: the
// program's own lines in crashloop's log, malformed in any other format.
func (r *Reader) settle() {
	if r.nunk == 0 {
		return
	}
	if r.format == FormatCrashloop {
		r.other += r.nunk
	} else {
		r.bad += r.nunk
		for _, e := range r.unknown {
			if len(r.errs) < keepErrors {
				r.errs = append(r.errs, e)
			}
		}
	}
	r.nunk, r.unknown = 0, nil
}

// journalPretty reports whether the document that starts with a line "{"
// is journalctl -o json-pretty: whether its first entry names a journal
// field.
func (r *Reader) journalPretty() bool {
	ahead, _ := r.src.Peek(r.src.Size())
	if i := bytes.Index(ahead, []byte("\n}")); i >= 0 {
		ahead = ahead[:i]
	}
	return bytes.Contains(ahead, []byte(`"__REALTIME_TIMESTAMP"`)) || bytes.Contains(ahead, []byte(`"__CURSOR"`))
}

// plainCSV reports whether line is a line of the plain CSV form: its
// header, or a record.
func plainCSV(line []byte, n int) bool {
	var out []Record
	return (csvParser{}).line(line, n, &out) == nil
}

// errOther is a parser's answer for a line that is not the format's and
// not malformed either: the program's own output in crashloop's log.
var errOther = errors.New("not a line of the format")

// malformed counts a line that could not be read.
func (r *Reader) malformed(line int, err error) {
	r.bad++
	if len(r.errs) < keepErrors {
		r.errs = append(r.errs, &LineError{Source: r.name, Line: line, Err: err})
	}
}

// newParser returns the line parser of f.
func newParser(f Format) parser {
	switch f {
	case FormatJournald:
		return newJournald()
	case FormatDocker:
		return newDocker()
	case FormatCrashloop:
		return newCrashloopLog()
	case FormatCSV:
		return &csvParser{}
	case FormatJSONLines:
		return &jsonlParser{}
	}
	return unknownParser{}
}

// unknownParser is the parser of a history whose format is unknown: every
// line is malformed.
type unknownParser struct{}

func (unknownParser) line([]byte, int, *[]Record) error { return errUnknownFormat }

var errUnknownFormat = errors.New("unknown format: not journalctl -o json, kubectl -o json, docker events, crashloop's JSON log, CSV (time,key,event,code) or JSON lines")

func (unknownParser) end(*[]Record) {}

// detect tells the format of a history from its first line that is not
// blank.
func detect(line []byte) Format {
	if line[0] != '{' {
		if line[0] == '[' {
			return 0
		}
		return FormatCSV
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(line, &probe); err != nil {
		// Not a whole object: a cut line of a line format, or the first
		// line of a document that goes on.
		for _, f := range []struct {
			field  string
			format Format
		}{{`"__REALTIME_TIMESTAMP"`, FormatJournald}, {`"MESSAGE_ID"`, FormatJournald}, {`"timeNano"`, FormatDocker},
			{`"msg"`, FormatCrashloop}, {`"event"`, FormatJSONLines}} {
			if bytes.Contains(line, []byte(f.field)) {
				return f.format
			}
		}
		if string(line) == "{" || bytes.Contains(line, []byte(`"apiVersion"`)) || bytes.Contains(line, []byte(`"items"`)) ||
			bytes.Contains(line, []byte(`"kind"`)) {
			return FormatKubernetes
		}
		return FormatAuto
	}
	has := func(k string) bool { _, ok := probe[k]; return ok }
	switch {
	case has("__REALTIME_TIMESTAMP") || has("MESSAGE_ID") || has("__CURSOR"):
		return FormatJournald
	case has("timeNano") || (has("Type") && has("Action")) || (has("status") && has("id") && has("time")):
		return FormatDocker
	case has("items") || has("involvedObject") || (has("apiVersion") && has("kind")):
		return FormatKubernetes
	case has("msg") && has("level") && has("time"):
		return FormatCrashloop
	case has("event") && has("key"):
		return FormatJSONLines
	}
	return 0
}

// exitCause describes an exit status as crashloop does: "exited with
// status N", or "killed by signal NAME" for 128+N.
func exitCause(code int) string {
	if code > 128 && code < 128+65 {
		if name, ok := signalNames[code-128]; ok {
			return "killed by signal " + name
		}
	}
	return "exited with status " + strconv.Itoa(code)
}

// signalNames are the names of the Linux signals, without "SIG".
var signalNames = map[int]string{1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 5: "TRAP", 6: "ABRT", 7: "BUS", 8: "FPE", 9: "KILL",
	10: "USR1", 11: "SEGV", 12: "USR2", 13: "PIPE", 14: "ALRM", 15: "TERM", 17: "CHLD", 18: "CONT", 19: "STOP", 20: "TSTP",
	21: "TTIN", 22: "TTOU", 23: "URG", 24: "XCPU", 25: "XFSZ", 26: "VTALRM", 27: "PROF", 28: "WINCH", 29: "IO", 30: "PWR", 31: "SYS"}

// signalNumber reads a signal as a name ("TERM", "SIGTERM") or a number.
func signalNumber(s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return n, true
	}
	if len(s) > 3 && s[:3] == "SIG" {
		s = s[3:]
	}
	for n, name := range signalNames {
		if name == s {
			return n, true
		}
	}
	return 0, false
}
