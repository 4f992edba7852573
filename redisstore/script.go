package redisstore

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/crashloopguard/crashloop/internal/seam"
	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
)

// storeSource is every step of a Store: one Lua source whose main takes
// the operation as its first argument, the deployment's epoch as its
// second, and the operation's own after them (see the file's header for
// the layout and the conventions, and docs/redis.md, Messages).
//
//go:embed store.lua
var storeSource string

// script is storeSource as a Store runs it.
var script = newProgram(storeSource)

// program is a source of store.lua as the server runs it. The steps that
// judge (judge, proceed, fleet: every decision) call the function that the
// source registers as a library (FCALL), loaded once by the first call
// that finds it missing: its tables and closures are made at the load, not
// at each call. Every other step, and every step on a server without
// functions (before Redis 7.0), runs it as a script: EVALSHA, then EVAL
// after NOSCRIPT. Both are safe after a restart, a flush or a failover to a
// replica that never saw them: a call that finds neither ran nothing.
type program struct {
	script  *redis.Script
	name    string // the library's and its function's: crashloop_ and the source's SHA-1
	library string // the source as a library: a shebang naming it, and main registered
}

// newProgram makes a program of src, a source that defines main.
func newProgram(src string) *program {
	sum := sha1.Sum([]byte(src))
	name := "crashloop_" + hex.EncodeToString(sum[:])
	return &program{script: redis.NewScript(src), name: name,
		library: "#!lua name=" + name + "\n" + src + "\nredis.register_function('" + name + "', main)\n"}
}

// functions reports whether op runs as a function (FCALL).
func functions(op any) bool {
	return op == "judge" || op == "proceed" || op == "fleet"
}

// run runs one step of p on rdb: args[0] names its operation. A server
// that does not know FCALL, or a user that may not call or load functions,
// is noted in scripts, which makes every later step of the Store a script.
func (p *program) run(ctx context.Context, rdb redis.UniversalClient, scripts *atomic.Bool, keys []string, args []any) (any, error) {
	if len(args) == 0 || !functions(args[0]) || scripts.Load() {
		return p.script.Run(ctx, rdb, keys, args...).Result()
	}
	res, err := rdb.FCall(ctx, p.name, keys, args...).Result()
	if isError(err, "ERR Function not found") {
		if err = p.load(ctx, rdb, keys[0]); err == nil {
			res, err = rdb.FCall(ctx, p.name, keys, args...).Result()
		}
	}
	if isError(err, "ERR unknown command") || redis.IsPermissionError(err) {
		scripts.Store(true)
		return p.script.Run(ctx, rdb, keys, args...).Result()
	}
	return res, err
}

// isError reports whether err is an error reply of the server that starts
// with prefix.
func isError(err error, prefix string) bool {
	if err == nil { // before re, which escapes: no allocation on success
		return false
	}
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), prefix)
}

// load loads p's library on the server of key. On a cluster it loads it on
// the master of key's slot, whose error it returns, and on every other
// master it knows, ignoring theirs: a slot migrated to another master
// since the client's map of slots was made needs it there. A library
// loaded meanwhile (by another Store) is not an error.
func (p *program) load(ctx context.Context, rdb redis.UniversalClient, key string) error {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return p.loadOn(ctx, rdb)
	}
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return err
	}
	err = p.loadOn(ctx, node)
	_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if c != node {
			_ = p.loadOn(ctx, c)
		}
		return nil
	})
	return err
}

// loadOn loads p's library on the server of c.
func (p *program) loadOn(ctx context.Context, c redis.Cmdable) error {
	err := c.FunctionLoad(ctx, p.library).Err()
	if isError(err, "ERR Library '") && strings.HasSuffix(err.Error(), "' already exists") {
		return nil
	}
	return err
}

// keyspace names the Redis keys of one deployment. Every key starts with the
// hash tag {prefix}, so all the keys of a step hash to one slot of a Redis
// Cluster, and deployments with different prefixes share a server without
// sharing state. A key of the library (any string) only ever follows the
// tag: the first {...} of a key name is its hash tag.
type keyspace struct {
	tag                            string // "{prefix}:"
	fleetK, parkedK, heldK, causeK string // made once: every decision names them
}

// newKeyspace checks prefix: it must be non-empty and hold no brace, or
// Redis Cluster would hash another part of the key (an empty {} is no tag,
// and the first "}" closes it).
func newKeyspace(prefix string) (keyspace, error) {
	if prefix == "" || strings.ContainsAny(prefix, "{}") {
		return keyspace{}, fmt.Errorf("redisstore: key prefix %q: must be non-empty, without { or }", prefix)
	}
	tag := "{" + prefix + "}:"
	return keyspace{tag: tag, fleetK: tag + "fleet", parkedK: tag + "parked", heldK: tag + "held", causeK: tag + "causes"}, nil
}

// The keys of a deployment; docs/redis.md (Keys) says what each holds.
func (k keyspace) record(key string) string     { return k.tag + "k:" + key }
func (k keyspace) fleet() string                { return k.fleetK }
func (k keyspace) parked() string               { return k.parkedK }
func (k keyspace) held() string                 { return k.heldK }
func (k keyspace) causes() string               { return k.causeK }
func (k keyspace) member(replica string) string { return k.tag + "m:" + replica }
func (k keyspace) replicas() string             { return k.tag + "replicas" }
func (k keyspace) events() string               { return k.tag + "events" }
func (k keyspace) claim(version int64) string {
	return k.tag + "claim:" + strconv.FormatInt(version, 10)
}
func (k keyspace) claimLost(epoch string) string { return k.tag + "claim:lost:" + epoch }
func (k keyspace) epoch() string                 { return k.tag + "epoch" }
func (k keyspace) config(digest string) string   { return k.tag + "cfg:" + digest }

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
// ('P') or a resume ('R') of a key, with its epoch and origin.

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

// decodeNotice reads a notice: the change it tells of, the epoch it was
// made in and its origin.
func decodeNotice(msg string) (ch share.Change, epoch, origin string, ok bool) {
	if msg == "" {
		return ch, "", "", false
	}
	kind, rest := msg[0], msg[1:]
	if epoch, rest, ok = field(rest); !ok {
		return ch, "", "", false
	}
	if origin, rest, ok = field(rest); !ok {
		return ch, "", "", false
	}
	if ch.Key, rest, ok = field(rest); !ok {
		return ch, "", "", false
	}
	switch kind {
	case 'R', 'F':
		v, err := strconv.ParseInt(rest, 10, 64)
		ch.Version, ch.Forgotten = v, kind == 'F'
		return ch, epoch, origin, err == nil && v > 0
	case 'P':
		pe, ok := decodePark(ch.Key, rest)
		if ok {
			ch.Park, ch.Version = pe, pe.Version
		}
		return ch, epoch, origin, ok
	}
	return ch, "", "", false
}

// decodePark reads the park part of a notice: since (16 digits), attempts,
// a comma, the version, a comma, the reason as a field, and the stored
// cause.
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
	version, rest, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, false
	}
	v, err := strconv.ParseInt(version, 10, 64)
	if err != nil || v < 0 {
		return nil, false
	}
	reason, cause, ok := field(rest)
	if !ok || reason == "" || (cause != "" && cause[0] != 'e') {
		return nil, false
	}
	return &crashloop.ParkedError{Key: key, Reason: reason, Attempts: n, Since: time.UnixMicro(since),
		LastError: decodeCause(cause, reason), Version: v}, true
}

// encodePark writes pe as the script keeps a park (see pdec in store.lua):
// since in 16 digits (clamped to the years 1970 to 2286), attempts, a
// comma, the version, a comma, the reason as a field, and the stored cause
// (only the text of the LastError).
func encodePark(pe *crashloop.ParkedError) string {
	var cause string
	if pe.LastError != nil {
		cause = encodeCause(errtext.Text(pe.LastError), true)
	}
	since := min(max(pe.Since.UnixMicro(), 0), maxMicros-1)
	return micros16(since) + strconv.Itoa(pe.Attempts) + "," + strconv.FormatInt(max(pe.Version, 0), 10) + "," +
		strconv.Itoa(len(pe.Reason)) + ":" + pe.Reason + cause
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

// object is a reply of name/value pairs, read by name: the reply itself,
// its shape checked (a reply has a few fields: a scan finds one faster
// than a map is made).
type object []any

// get returns the value of field name, if o has it.
func (o object) get(name string) (any, bool) {
	for i := 0; i < len(o); i += 2 {
		if o[i] == name {
			return o[i+1], true
		}
	}
	return nil, false
}

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
	for i := 0; i < len(arr); i += 2 {
		name, ok := arr[i].(string)
		switch {
		case !ok:
			return nil, fmt.Errorf("a name that is %s", shape(arr[i]))
		case !slices.Contains(known, name):
			return nil, fmt.Errorf("unknown field %q", name)
		}
		if _, dup := object(arr[:i]).get(name); dup {
			return nil, fmt.Errorf("field %q twice", name)
		}
	}
	return object(arr), nil
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
	v, ok := f.o.get(name)
	if !ok {
		f.err = fmt.Errorf("no field %q", name)
	}
	return v, ok
}

// optional reports whether the object has field name: a field that is
// omitted when it is 0.
func (f *fields) optional(name string) bool {
	_, ok := f.o.get(name)
	return ok
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

// readPark reads a park object (key, reason, attempts, since, cause,
// version). key is the key it must be the park of, or "" for any.
func readPark(v any, key string) (*crashloop.ParkedError, error) {
	o, err := readObject(v, "key", "reason", "attempts", "since", "cause", "version")
	if err != nil {
		return nil, err
	}
	f := fields{o: o}
	pe := &crashloop.ParkedError{Key: f.str("key"), Reason: f.str("reason"), Attempts: int(f.int("attempts")),
		Since: time.UnixMicro(f.int("since")), Version: f.int("version")}
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
func readChange(v any) (*share.FleetChange, error) {
	o, err := readObject(v, "reason", "restarts", "failing", "total")
	if err != nil {
		return nil, err
	}
	f := fields{o: o}
	c := &share.FleetChange{Reason: f.str("reason"), Restarts: int(f.int("restarts")), Failing: int(f.int("failing")),
		Total: int(f.int("total"))}
	return c, f.err
}

// readChangeField reads the FleetChange in field name of o, if any.
func readChangeField(o object, name string) (*share.FleetChange, error) {
	v, ok := o.get(name)
	if !ok {
		return nil, nil
	}
	c, err := readChange(v)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", name, err)
	}
	return c, nil
}

// readCauseField reads the CauseChange object (cause, keys) in field name
// of o, if any.
func readCauseField(o object, name string) (*seam.CauseChange, error) {
	v, ok := o.get(name)
	if !ok {
		return nil, nil
	}
	c, err := readObject(v, "cause", "keys")
	if err == nil {
		f := fields{o: c}
		ch := &seam.CauseChange{Cause: f.str("cause"), Keys: int(f.int("keys"))}
		if err = f.err; err == nil {
			return ch, nil
		}
	}
	return nil, fmt.Errorf("field %q: %w", name, err)
}

// readStands reads a key as it stands in a reply on key: its version and,
// if any, its park. flag, when not "", names a 0/1 field that comes first
// (applied, written), which it returns.
func readStands(v any, key, flag string) (share.Change, bool, error) {
	known := []string{"version", "park"}
	if flag != "" {
		known = append(known, flag)
	}
	o, err := readObject(v, known...)
	if err != nil {
		return share.Change{}, false, err
	}
	f := fields{o: o}
	ch := share.Change{Key: key, Version: f.int("version")}
	var set bool
	if flag != "" {
		set = f.flag(flag)
	}
	if f.err != nil {
		return share.Change{}, false, f.err
	}
	if ch.Version < 0 {
		return share.Change{}, false, fmt.Errorf("version %d", ch.Version)
	}
	if p, ok := o.get("park"); ok {
		if ch.Park, err = readPark(p, key); err != nil {
			return share.Change{}, false, fmt.Errorf("field \"park\": %w", err)
		}
	}
	return ch, set, nil
}

// readVerdict reads the verdict of a judge or proceed step on key. now is
// the time of the call in client-time mode (the Verdict keeps it as
// given), or the zero time for the server's.
func readVerdict(v any, key string, now time.Time) (share.Verdict, error) {
	o, err := readObject(v, "now", "new_park", "held", "attempt", "restarts", "wait_ns", "park", "tripped", "rearmed",
		"cause", "cause_held", "cause_released", "probe", "probe_ns")
	if err != nil {
		return share.Verdict{}, err
	}
	f := fields{o: o}
	ts := f.int("now")
	if now.IsZero() {
		now = time.UnixMicro(ts)
	}
	vd := share.Verdict{Now: now, NewPark: f.optional("new_park") && f.flag("new_park"),
		Held: f.optional("held") && f.flag("held"), Attempt: int(f.int("attempt")), Restarts: int(f.int("restarts"))}
	if f.optional("wait_ns") {
		vd.Wait = time.Duration(f.int("wait_ns"))
	}
	if f.optional("cause") {
		vd.Cause = f.str("cause")
	}
	vd.Probe = f.optional("probe") && f.flag("probe")
	if f.optional("probe_ns") {
		vd.ProbeAt = now.Add(time.Duration(f.int("probe_ns")))
	}
	if f.err != nil {
		return share.Verdict{}, f.err
	}
	if p, ok := o.get("park"); ok {
		if vd.Park, err = readPark(p, key); err != nil {
			return share.Verdict{}, fmt.Errorf("field \"park\": %w", err)
		}
	}
	if vd.Tripped, err = readChangeField(o, "tripped"); err != nil {
		return share.Verdict{}, err
	}
	if vd.Rearmed, err = readChangeField(o, "rearmed"); err != nil {
		return share.Verdict{}, err
	}
	if vd.CauseHeld, err = readCauseField(o, "cause_held"); err != nil {
		return share.Verdict{}, err
	}
	if vd.CauseReleased, err = readCauseField(o, "cause_released"); err != nil {
		return share.Verdict{}, err
	}
	switch {
	case vd.NewPark && vd.Park == nil:
		return share.Verdict{}, errors.New("a new park without its park")
	case vd.Held != (vd.Wait > 0):
		return share.Verdict{}, fmt.Errorf("held %v with a wait of %v", vd.Held, vd.Wait)
	}
	return vd, nil
}

// fleetReply is the reply of a fleet step.
type fleetReply struct {
	tripped              bool
	since                time.Time
	failing, total, hour int
	perHour              int
	cooldown             time.Duration
	heldCauses           []string // sorted; nil for none
}

// readFleet reads the reply of a fleet step.
func readFleet(v any) (fleetReply, error) {
	o, err := readObject(v, "tripped", "since", "failing", "total", "hour", "per_hour", "cooldown_ns", "now", "held_causes")
	if err != nil {
		return fleetReply{}, err
	}
	f := fields{o: o}
	r := fleetReply{tripped: f.flag("tripped"), since: time.UnixMicro(f.int("since")), failing: int(f.int("failing")),
		total: int(f.int("total")), hour: int(f.int("hour")), perHour: int(f.int("per_hour")),
		cooldown: time.Duration(f.int("cooldown_ns"))}
	f.int("now")
	held, _ := f.get("held_causes")
	arr, ok := held.([]any)
	if f.err == nil && !ok {
		f.fail("held_causes", held, "an array")
	}
	for _, c := range arr {
		s, ok := c.(string)
		if !ok {
			return fleetReply{}, fmt.Errorf("field \"held_causes\": %s, want a string", shape(c))
		}
		r.heldCauses = append(r.heldCauses, s)
	}
	slices.Sort(r.heldCauses)
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

// readRestored reads the reply of restore of parks: for each, whether it
// was written and its key as it stands.
func readRestored(v any, parks []*crashloop.ParkedError) ([]share.Restored, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != len(parks) {
		return nil, fmt.Errorf("%s, want an array of %d", shape(v), len(parks))
	}
	out := make([]share.Restored, len(parks))
	for i, o := range arr {
		ch, written, err := readStands(o, parks[i].Key, "written")
		if err != nil {
			return nil, fmt.Errorf("park %d: %w", i, err)
		}
		if written && ch.Park == nil {
			return nil, fmt.Errorf("park %d: written, but not parked", i)
		}
		out[i] = share.Restored{Change: ch, Written: written}
	}
	return out, nil
}

// errNotOpen is the error of Judge and Proceed on a Store that was not
// opened: they judge by the Supervisor's configuration.
var errNotOpen = errors.New("redisstore: Judge and Proceed need Open first (a Supervisor opens its ledger)")

// run calls the script for op on keys with args (after op and the epoch:
// the operation's own arguments, in order) and the deployment's epoch
// under the Store's timeout and returns its reply, or ctx's error as soon
// as ctx ends (see eval). A nil reply, which no step gives, is returned as
// nil for the readers to refuse. A step that finds the server lost its
// state returns a *share.StateLostError. A step that finds no
// configuration under its digest (the server lost it, or never had it)
// writes it and is sent again, once.
func (s *Store) run(ctx context.Context, op string, keys []string, args ...any) (any, error) {
	if err := s.gate(ctx, op); err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	epoch, err := s.knownEpoch(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, s.classify(err))
	}
	full := make([]any, 0, 2+len(args))
	full = append(append(full, op, epoch), args...)
	res, err := s.eval(ctx, keys, full)
	if isNoConfig(err) {
		if err = s.writeConfig(ctx, epoch); err == nil {
			res, err = s.eval(ctx, keys, full)
		}
	}
	if cur, ok := stateLost(err); ok {
		if cur == "" { // none: this Store makes it, or learns who did
			if cur, err = s.readEpoch(ctx, "", 0, 0); err != nil {
				return nil, fmt.Errorf("redisstore: %s: %w", op, s.classify(err))
			}
		}
		err := s.lostState(ctx, epoch, cur)
		s.membersLost() // written again, in the adopted epoch
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
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

// isNoConfig reports whether err is the refusal of a step that judges and
// found no configuration under its digest.
func isNoConfig(err error) bool {
	if err == nil { // before re, which escapes: no allocation on success
		return false
	}
	var re redis.Error
	return errors.As(err, &re) && re.Error() == "crashloop: no_config"
}

// writeConfig stores the configuration of the Open Store under its digest,
// in the deployment's epoch as the Store knows it.
func (s *Store) writeConfig(ctx context.Context, epoch string) error {
	p := s.plan.Load()
	res, err := s.eval(ctx, []string{p.key}, []any{"config", epoch, p.config})
	if err != nil {
		return err
	}
	o, err := readObject(res, "written")
	if err != nil {
		return badReply("config", err)
	}
	f := fields{o: o}
	if !f.flag("written") || f.err != nil {
		return badReply("config", firstErr(f.err, errors.New("not written")))
	}
	return nil
}

// stateLost reads the deployment's new epoch from the error of a step that
// found its server lost its state ("" when the server has none).
func stateLost(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return "", false
	}
	return strings.CutPrefix(re.Error(), "crashloop: state_lost ")
}

// knownEpoch returns the deployment's epoch as this Store knows it,
// learning it (making it, for a new deployment) at its first call.
func (s *Store) knownEpoch(ctx context.Context) (string, error) {
	s.mu.Lock()
	e := s.epoch
	s.mu.Unlock()
	if e != "" {
		return e, nil
	}
	e, err := s.readEpoch(ctx, "", 0, 0)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	if s.epoch == "" {
		s.adopt(e)
	}
	e = s.epoch
	s.mu.Unlock()
	return e, nil
}

// adopt makes e the epoch this Store knows, and makes a new fresh epoch if
// e is its fresh one: a server that loses the state this Store made must
// not get the same epoch back from it, or the loss would not show. s.mu
// must be held.
func (s *Store) adopt(e string) {
	s.epoch = e
	if s.fresh == e {
		s.fresh = randomSuffix(16)
	}
	s.floor, s.seen = max(s.floor, s.seen), 0
}

// saw notes version v, from a reply or a notice of the epoch this Store
// knows: a server whose {p}:seq is below it lost writes (see checkEpoch).
func (s *Store) saw(v int64) {
	s.mu.Lock()
	s.seen = max(s.seen, v)
	s.mu.Unlock()
}

// freshEpoch returns the epoch this Store makes for a deployment that has
// none.
func (s *Store) freshEpoch() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fresh
}

// readEpoch returns the deployment's epoch as the server holds it, making
// it (this Store's fresh one) when there is none. When it is known, the
// epoch this Store knows, and the server's {p}:seq is below seen, the
// highest version this Store saw in it, the server lost acknowledged
// writes: it moves the deployment to a new epoch, which it returns (see
// the state check in store.lua). seen and floor (the highest version seen
// in the epochs before) raise {p}:seq.
func (s *Store) readEpoch(ctx context.Context, known string, seen, floor int64) (string, error) {
	res, err := s.eval(ctx, []string{s.keys.epoch()}, []any{"epoch", known, s.freshEpoch(), seen, floor})
	if err != nil {
		return "", fmt.Errorf("epoch: %w", err)
	}
	o, err := readObject(res, "epoch")
	if err != nil {
		return "", badReply("epoch", err)
	}
	f := fields{o: o}
	e := f.str("epoch")
	if f.err != nil || e == "" {
		return "", badReply("epoch", firstErr(f.err, errors.New("an empty epoch")))
	}
	return e, nil
}

// lostState adopts the epoch cur of a deployment whose server lost the
// state of epoch old, and returns the error of the step that found it:
// exactly one replica of the deployment (the first opened Store to claim
// the loss) is told to announce it. The Store that adopts the epoch tells
// its Supervisor at once (see tellLost), then claims the loss; the caller
// gets the loss again, with Announce for the winner (a Supervisor takes
// each epoch's loss once, and announces it when told so). A claim of the
// loss that cannot be sent is tried again every second, up to a minute,
// and a late win is told to the Supervisor with Announce set.
func (s *Store) lostState(ctx context.Context, old, cur string) *share.StateLostError {
	s.mu.Lock()
	adopted := s.epoch == old
	if adopted {
		s.adopt(cur)
	}
	opened := s.opened
	s.mu.Unlock()
	announce := false
	if adopted && opened {
		// The Supervisor takes the loss before anything else is sent: a
		// claim it learnt in the state lost, sent now, would claim another
		// transition of the new epoch (it drops them at the loss). It is
		// told the loss again, by the caller's error or with Announce, and
		// takes each epoch's once.
		s.tellLost(lossOf(cur, false))
		var err error
		if announce, err = s.claim(ctx, s.keys.claimLost(cur), 0); err != nil {
			s.claimLossLater(cur)
		}
	}
	return lossOf(cur, announce)
}

// failoverEpoch starts the epochs that the server makes when it finds that
// it lost acknowledged writes (see the move in store.lua).
const failoverEpoch = "failover-"

// lossOf is the loss of state that made epoch: its Reason is "failover"
// for an epoch made because the server lost acknowledged writes.
func lossOf(epoch string, announce bool) *share.StateLostError {
	sl := &share.StateLostError{Announce: announce, Epoch: epoch}
	if strings.HasPrefix(epoch, failoverEpoch) {
		sl.Reason = share.ReasonFailover
	}
	return sl
}

// claimLossLater claims the loss that made epoch every second, up to
// claimTries times, until a claim is answered, and tells the Supervisor
// to announce it if it wins.
func (s *Store) claimLossLater(epoch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(claimRetry)
		defer t.Stop()
		for range claimTries {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
			}
			won, err := s.claim(s.ctx, s.keys.claimLost(epoch), 0)
			if err != nil {
				continue
			}
			if won {
				s.tellLost(lossOf(epoch, true))
			}
			return
		}
	}()
}

// How a claim of a loss that could not be sent is tried again: as a
// Supervisor tries its claims (docs/redis.md, Announcing).
const (
	claimRetry = time.Second
	claimTries = 60
)

// tellLost tells the Supervisor of a loss of state this Store found by
// itself (err, a *share.StateLostError; any other error is ignored),
// for it to write back the parks it knows at once.
func (s *Store) tellLost(err error) {
	var sl *share.StateLostError
	if errors.As(err, &sl) && s.notify != nil {
		s.notify(share.Change{StateLost: sl})
	}
}

// checkEpoch reads the deployment's epoch and, when it is not the one this
// Store knows (the server lost its state), adopts it and tells the
// Supervisor, as a call that found it would. A server that kept the epoch
// but lost versions this Store saw (a failover to a replica the last
// writes had not reached) is moved to a new epoch first. A Store that
// knows no epoch yet learns it at its first call.
func (s *Store) checkEpoch(ctx context.Context) {
	s.mu.Lock()
	old, seen, floor := s.epoch, s.seen, s.floor
	s.mu.Unlock()
	if old == "" {
		return
	}
	cur, err := s.readEpoch(ctx, old, seen, floor)
	if err != nil || cur == old {
		return
	}
	s.lossFound(s.lostState(ctx, old, cur))
}
