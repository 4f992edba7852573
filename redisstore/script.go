package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/redis/go-redis/v9"
)

// storeSource is every step of a Store: one Lua script whose first argument
// names the operation and whose other arguments are name/value pairs (see
// the file's header for the layout and the conventions, and docs/redis.md,
// Messages).
//
//go:embed store.lua
var storeSource string

// script runs storeSource by EVALSHA, falling back to EVAL (which loads it)
// when the server answers NOSCRIPT: after a restart, a SCRIPT FLUSH or a
// failover to a replica that never saw it.
var script = redis.NewScript(storeSource)

// keyspace names the Redis keys of one deployment. Every key starts with the
// hash tag {prefix}, so all the keys of a step hash to one slot of a Redis
// Cluster, and deployments with different prefixes share a server without
// sharing state. A key of the library (any string) only ever follows the
// tag: the first {...} of a key name is its hash tag.
type keyspace struct {
	tag string // "{prefix}:"
}

// newKeyspace checks prefix: it must be non-empty and hold no brace, or
// Redis Cluster would hash another part of the key (an empty {} is no tag,
// and the first "}" closes it).
func newKeyspace(prefix string) (keyspace, error) {
	if prefix == "" || strings.ContainsAny(prefix, "{}") {
		return keyspace{}, fmt.Errorf("redisstore: key prefix %q: must be non-empty, without { or }", prefix)
	}
	return keyspace{tag: "{" + prefix + "}:"}, nil
}

// The keys of a deployment; store.lua's header says what each holds.
func (k keyspace) record(key string) string     { return k.tag + "k:" + key }
func (k keyspace) fleet() string                { return k.tag + "fleet" }
func (k keyspace) parked() string               { return k.tag + "parked" }
func (k keyspace) held() string                 { return k.tag + "held" }
func (k keyspace) report(replica string) string { return k.tag + "r:" + replica }
func (k keyspace) replicas() string             { return k.tag + "replicas" }
func (k keyspace) events() string               { return k.tag + "events" }

// maxMicros bounds the times the script keeps: 16 decimal digits of
// microseconds since the Unix epoch, up to the year 2286.
const maxMicros = 1e16

// maxExact is 2^53: Lua's numbers (doubles) hold every integer below it.
const maxExact = 1 << 53

// timeArg is the argument now of a step at now: integer microseconds since
// the Unix epoch in 16 digits (a time between two microseconds is read as
// the earlier one), or "" for the server's clock. A time before 1970 or
// after 2286 is an error.
func timeArg(now time.Time, serverTime bool) (string, error) {
	if serverTime {
		return "", nil
	}
	us := now.UnixMicro()
	if us < 0 || us >= maxMicros {
		return "", fmt.Errorf("time %v out of the range 1970 to 2286", now)
	}
	return micros16(us), nil
}

// micros16 writes us (0 <= us < maxMicros) in 16 digits, zero-padded.
func micros16(us int64) string {
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = byte('0' + us%10)
		us /= 10
	}
	return string(b[:])
}

// micros returns d in whole microseconds, rounded down: a window or gap of
// d holds an age a (a whole number of microseconds) exactly when a <= d/1µs.
func micros(d time.Duration) int64 { return int64(d / time.Microsecond) }

// microsUp returns d in whole microseconds, rounded up: a cooldown of d has
// passed after an age a (a whole number of microseconds) exactly when
// a >= ceil(d/1µs).
func microsUp(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond > 0 {
		us++
	}
	return us
}

// ttlMillis is d in whole milliseconds, rounded up, at least 1 (PEXPIRE's
// unit; 0 would delete the key at once).
func ttlMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 || ms < 1 {
		ms++
	}
	return ms
}

// encodeCause stores the text of a failure: "" for none, else "e" and the
// text, so that no failure and an error with an empty text stay apart.
func encodeCause(text string, ok bool) string {
	if !ok {
		return ""
	}
	return "e" + text
}

// decodeCause is the LastError of a park with reason and stored cause c.
func decodeCause(c, reason string) error {
	if c == "" {
		return nil
	}
	var sentinel error
	if reason == crashloop.ReasonNeedsHuman {
		sentinel = crashloop.ErrNeedsHuman
	}
	return errtext.Restore(c[1:], sentinel)
}

// The notices of the deployment's channel (see notice in store.lua): a park
// ('P') or a resume ('R') of a key, with its origin.

// field reads a length-prefixed field ("5:hello") from s, returning it and
// the rest.
func field(s string) (string, string, bool) {
	n, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", false
	}
	l, err := strconv.Atoi(n)
	if err != nil || l < 0 || l > len(rest) {
		return "", "", false
	}
	return rest[:l], rest[l:], true
}

// decodeNotice reads a notice: the change it tells of and its origin.
func decodeNotice(msg string) (ch crashloop.LedgerChange, origin string, ok bool) {
	if msg == "" {
		return ch, "", false
	}
	kind, rest := msg[0], msg[1:]
	origin, rest, ok = field(rest)
	if !ok {
		return ch, "", false
	}
	if ch.Key, rest, ok = field(rest); !ok {
		return ch, "", false
	}
	switch kind {
	case 'R':
		return ch, origin, rest == ""
	case 'P':
		pe, ok := decodePark(ch.Key, rest)
		ch.Park = pe
		return ch, origin, ok
	}
	return ch, "", false
}

// decodePark reads the park part of a notice: since (16 digits), attempts,
// a comma, the reason as a field, and the stored cause.
func decodePark(key, s string) (*crashloop.ParkedError, bool) {
	if len(s) < 16 {
		return nil, false
	}
	since, err := strconv.ParseInt(s[:16], 10, 64)
	if err != nil {
		return nil, false
	}
	attempts, rest, ok := strings.Cut(s[16:], ",")
	if !ok {
		return nil, false
	}
	n, err := strconv.Atoi(attempts)
	if err != nil {
		return nil, false
	}
	reason, cause, ok := field(rest)
	if !ok || reason == "" || (cause != "" && cause[0] != 'e') {
		return nil, false
	}
	return &crashloop.ParkedError{Key: key, Reason: reason, Attempts: n, Since: time.UnixMicro(since),
		LastError: decodeCause(cause, reason)}, true
}

// encodePark writes pe as the script keeps a park (see pdec in store.lua):
// since in 16 digits (clamped to the years 1970 to 2286), attempts, a
// comma, the reason as a field, and the stored cause (only the text of the
// LastError).
func encodePark(pe *crashloop.ParkedError) string {
	var cause string
	if pe.LastError != nil {
		cause = encodeCause(pe.LastError.Error(), true)
	}
	since := min(max(pe.Since.UnixMicro(), 0), maxMicros-1)
	return micros16(since) + strconv.Itoa(pe.Attempts) + "," + strconv.Itoa(len(pe.Reason)) + ":" + pe.Reason + cause
}

// The replies of the script are name/value pairs in a flat array (see
// store.lua), read by name. A reply of another shape (another type, an odd
// length, a name this code does not know, a field missing or of another
// type) means that the script and this code are out of step: the step
// fails with an error matching errBadReply, never with zero values.

// errBadReply is matched by the error of a step whose reply has another
// shape than the one read.
var errBadReply = errors.New("reply of the wrong shape")

// badReply is the error of step op whose reply is wrong as err says.
func badReply(op string, err error) error {
	return fmt.Errorf("redisstore: %s: %w: %w", op, errBadReply, err)
}

// shape describes v for an error: its type and, for a scalar, its value.
func shape(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case string:
		return fmt.Sprintf("the string %q", v)
	case int64:
		return fmt.Sprintf("the integer %d", v)
	case []any:
		return fmt.Sprintf("an array of %d", len(v))
	}
	return fmt.Sprintf("a %T", v)
}

// object is a reply of name/value pairs, read by name.
type object map[string]any

// readObject reads v as name/value pairs whose names are each in known and
// given once.
func readObject(v any, known ...string) (object, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s, want an array of name/value pairs", shape(v))
	}
	if len(arr)%2 != 0 {
		return nil, fmt.Errorf("an array of %d, want name/value pairs", len(arr))
	}
	o := make(object, len(arr)/2)
	for i := 0; i < len(arr); i += 2 {
		name, ok := arr[i].(string)
		switch {
		case !ok:
			return nil, fmt.Errorf("a name that is %s", shape(arr[i]))
		case !slices.Contains(known, name):
			return nil, fmt.Errorf("unknown field %q", name)
		}
		if _, dup := o[name]; dup {
			return nil, fmt.Errorf("field %q twice", name)
		}
		o[name] = arr[i+1]
	}
	return o, nil
}

// fields reads the fields of an object, keeping the first error: a getter
// after an error returns a zero value.
type fields struct {
	o   object
	err error
}

func (f *fields) get(name string) (any, bool) {
	if f.err != nil {
		return nil, false
	}
	v, ok := f.o[name]
	if !ok {
		f.err = fmt.Errorf("no field %q", name)
	}
	return v, ok
}

func (f *fields) fail(name string, v any, want string) {
	f.err = fmt.Errorf("field %q: %s, want %s", name, shape(v), want)
}

// int reads the integer field name.
func (f *fields) int(name string) int64 {
	v, ok := f.get(name)
	if !ok {
		return 0
	}
	n, ok := v.(int64)
	if !ok {
		f.fail(name, v, "an integer")
	}
	return n
}

// flag reads the field name, 0 or 1.
func (f *fields) flag(name string) bool {
	v, ok := f.get(name)
	if !ok {
		return false
	}
	if n, ok := v.(int64); ok && (n == 0 || n == 1) {
		return n == 1
	}
	f.fail(name, v, "0 or 1")
	return false
}

// str reads the string field name.
func (f *fields) str(name string) string {
	v, ok := f.get(name)
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		f.fail(name, v, "a string")
	}
	return s
}

// readPark reads a park object (key, reason, attempts, since, cause). key
// is the key it must be the park of, or "" for any.
func readPark(v any, key string) (*crashloop.ParkedError, error) {
	o, err := readObject(v, "key", "reason", "attempts", "since", "cause")
	if err != nil {
		return nil, err
	}
	f := fields{o: o}
	pe := &crashloop.ParkedError{Key: f.str("key"), Reason: f.str("reason"), Attempts: int(f.int("attempts")),
		Since: time.UnixMicro(f.int("since"))}
	cause := f.str("cause")
	switch {
	case f.err != nil:
		return nil, f.err
	case key != "" && pe.Key != key:
		return nil, fmt.Errorf("the park of %q, want %q's", pe.Key, key)
	case pe.Reason == "":
		return nil, errors.New("a park without a reason")
	case cause != "" && cause[0] != 'e':
		return nil, fmt.Errorf("cause %q: want '' or 'e' and its text", cause)
	}
	pe.LastError = decodeCause(cause, pe.Reason)
	return pe, nil
}

// readChange reads a FleetChange object (reason, restarts, failing,
// total).
func readChange(v any) (*crashloop.FleetChange, error) {
	o, err := readObject(v, "reason", "restarts", "failing", "total")
	if err != nil {
		return nil, err
	}
	f := fields{o: o}
	c := &crashloop.FleetChange{Reason: f.str("reason"), Restarts: int(f.int("restarts")), Failing: int(f.int("failing")),
		Total: int(f.int("total"))}
	return c, f.err
}

// readChangeField reads the FleetChange in field name of o, if any.
func readChangeField(o object, name string) (*crashloop.FleetChange, error) {
	v, ok := o[name]
	if !ok {
		return nil, nil
	}
	c, err := readChange(v)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", name, err)
	}
	return c, nil
}

// readParkReply reads the reply of lookup, resume and forget on key: its
// park, or nothing.
func readParkReply(v any, key string) (*crashloop.ParkedError, error) {
	o, err := readObject(v, "park")
	if err != nil {
		return nil, err
	}
	if p, ok := o["park"]; ok {
		pe, err := readPark(p, key)
		if err != nil {
			return nil, fmt.Errorf("field \"park\": %w", err)
		}
		return pe, nil
	}
	return nil, nil
}

// readVerdict reads the verdict of a judge (with the report it wrote, if
// any) or proceed step on key. now is the time of the call in client-time
// mode (the Verdict keeps it as given), or the zero time for the server's.
func readVerdict(v any, key string, now time.Time, judge bool) (crashloop.Verdict, string, error) {
	known := []string{"now", "new_park", "held", "attempt", "restarts", "wait_ns", "park", "tripped", "rearmed"}
	if judge {
		known = append(known, "report")
	}
	o, err := readObject(v, known...)
	if err != nil {
		return crashloop.Verdict{}, "", err
	}
	f := fields{o: o}
	ts := f.int("now")
	if now.IsZero() {
		now = time.UnixMicro(ts)
	}
	vd := crashloop.Verdict{Now: now, NewPark: f.flag("new_park"), Held: f.flag("held"), Attempt: int(f.int("attempt")),
		Restarts: int(f.int("restarts")), Wait: time.Duration(f.int("wait_ns"))}
	var rep string
	if _, ok := o["report"]; ok {
		rep = f.str("report")
	}
	if f.err != nil {
		return crashloop.Verdict{}, "", f.err
	}
	if p, ok := o["park"]; ok {
		if vd.Park, err = readPark(p, key); err != nil {
			return crashloop.Verdict{}, "", fmt.Errorf("field \"park\": %w", err)
		}
	}
	if vd.Tripped, err = readChangeField(o, "tripped"); err != nil {
		return crashloop.Verdict{}, "", err
	}
	if vd.Rearmed, err = readChangeField(o, "rearmed"); err != nil {
		return crashloop.Verdict{}, "", err
	}
	if vd.NewPark && vd.Park == nil {
		return crashloop.Verdict{}, "", errors.New("a new park without its park")
	}
	return vd, rep, nil
}

// fleetReply is the reply of a fleet step.
type fleetReply struct {
	tripped              bool
	since                time.Time
	failing, total, hour int
	perHour              int
	cooldown             time.Duration
}

// readFleet reads the reply of a fleet step.
func readFleet(v any) (fleetReply, error) {
	o, err := readObject(v, "tripped", "since", "failing", "total", "hour", "per_hour", "cooldown_ns", "now")
	if err != nil {
		return fleetReply{}, err
	}
	f := fields{o: o}
	r := fleetReply{tripped: f.flag("tripped"), since: time.UnixMicro(f.int("since")), failing: int(f.int("failing")),
		total: int(f.int("total")), hour: int(f.int("hour")), perHour: int(f.int("per_hour")),
		cooldown: time.Duration(f.int("cooldown_ns"))}
	f.int("now")
	return r, f.err
}

// readParked reads the reply of parked: an array of parks.
func readParked(v any) ([]*crashloop.ParkedError, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s, want an array of parks", shape(v))
	}
	out := make([]*crashloop.ParkedError, 0, len(arr))
	for i, p := range arr {
		pe, err := readPark(p, "")
		if err != nil {
			return nil, fmt.Errorf("park %d: %w", i, err)
		}
		out = append(out, pe)
	}
	return out, nil
}

// readCount reads the reply of restore: how many parks it wrote, at most
// max.
func readCount(v any, most int) (int, error) {
	n, ok := v.(int64)
	if !ok || n < 0 || n > int64(most) {
		return 0, fmt.Errorf("%s, want a count from 0 to %d", shape(v), most)
	}
	return int(n), nil
}

// errNotOpen is the error of Judge and Proceed on a Store that was not
// opened: they judge by the Supervisor's configuration.
var errNotOpen = errors.New("redisstore: Judge and Proceed need Open first (a Supervisor opens its ledger)")

// run calls the script for op on keys with args (after op itself: name/value
// pairs) under the Store's timeout and returns its reply, or ctx's error as
// soon as ctx ends (see eval). A nil reply, which no step gives, is
// returned as nil for the readers to refuse.
func (s *Store) run(ctx context.Context, op string, keys []string, args ...any) (any, error) {
	if err := s.gate(ctx, op); err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	res, err := s.eval(ctx, keys, append([]any{op}, args...))
	if err != nil && !errors.Is(err, redis.Nil) {
		err = s.classify(err)
		var me *MisconfiguredError
		if errors.As(err, &me) && me.Cause == CauseOOM {
			s.full.Store(me)
		}
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return res, nil
}
