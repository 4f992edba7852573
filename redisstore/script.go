package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/redis/go-redis/v9"
)

// storeSource is every step of a Store: one Lua script whose first argument
// names the operation (see the file's header for the layout and the
// conventions).
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

// timeArg is the time argument of a step at now: integer microseconds since
// the Unix epoch in 16 digits (a time between two microseconds is read as
// the earlier one), or "" for the server's clock. A time before 1970 or
// after 2286 is an error.
func timeArg(now time.Time, serverTime bool) (any, error) {
	if serverTime {
		return "", nil
	}
	us := now.UnixMicro()
	if us < 0 || us >= maxMicros {
		return nil, fmt.Errorf("time %v out of the range 1970 to 2286", now)
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

// noTime is the time argument of a step that reads no time.
const noTime = "-"

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

// The replies of the script, read by position. A reply of another shape is
// a script and code out of step, which the tests catch: reading it gives
// zero values rather than a panic.
type reply []any

func (r reply) int(i int) int64 {
	if i < len(r) {
		if v, ok := r[i].(int64); ok {
			return v
		}
	}
	return 0
}

func (r reply) str(i int) string {
	if i < len(r) {
		if v, ok := r[i].(string); ok {
			return v
		}
	}
	return ""
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

// park reads the park of key from r at i (reason, attempts, since, cause):
// nil when the reason is empty.
func (r reply) park(key string, i int) *crashloop.ParkedError {
	reason := r.str(i)
	if reason == "" {
		return nil
	}
	return &crashloop.ParkedError{Key: key, Reason: reason, Attempts: int(r.int(i + 1)),
		Since: time.UnixMicro(r.int(i + 2)), LastError: decodeCause(r.str(i+3), reason)}
}

// change reads a FleetChange from r at i (reason, restarts, failing,
// total): nil when the reason is empty.
func (r reply) change(i int) *crashloop.FleetChange {
	reason := r.str(i)
	if reason == "" {
		return nil
	}
	return &crashloop.FleetChange{Reason: reason, Restarts: int(r.int(i + 1)), Failing: int(r.int(i + 2)), Total: int(r.int(i + 3))}
}

// verdict reads the verdict of a judge or proceed step on key. now is the
// time of the call in client-time mode (the Verdict keeps it as given), or
// the zero time for the server's.
func (r reply) verdict(key string, now time.Time) crashloop.Verdict {
	if now.IsZero() {
		now = time.UnixMicro(r.int(0))
	}
	flags := r.int(1)
	return crashloop.Verdict{Now: now, NewPark: flags&1 != 0, Held: flags&2 != 0, Attempt: int(r.int(2)),
		Restarts: int(r.int(3)), Wait: time.Duration(r.int(5)), Park: r.park(key, 6),
		Tripped: r.change(10), Rearmed: r.change(14)}
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

// errNotOpen is the error of Judge and Proceed on a Store that was not
// opened: they judge by the Supervisor's configuration.
var errNotOpen = errors.New("redisstore: Judge and Proceed need Open first (a Supervisor opens its ledger)")

// run calls the script for op on keys with args under the Store's timeout
// and returns its reply, or ctx's error as soon as ctx ends (see eval).
func (s *Store) run(ctx context.Context, op string, keys []string, args ...any) (any, error) {
	res, err := s.eval(ctx, keys, args)
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return res, nil
}

// runReply is run for a step whose reply is an array.
func (s *Store) runReply(ctx context.Context, op string, keys []string, args ...any) (reply, error) {
	res, err := s.run(ctx, op, keys, args...)
	if err != nil {
		return nil, err
	}
	r, _ := res.([]any)
	return r, nil
}
