package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// kernelsSource is every decision of the package: one Lua script whose first
// argument names the operation (see the file's header for the conventions).
//
//go:embed kernels.lua
var kernelsSource string

// kernels runs kernelsSource by EVALSHA, falling back to EVAL (which loads
// it) when the server answers NOSCRIPT: after a restart, a SCRIPT FLUSH or a
// failover to a replica that never saw it.
var kernels = redis.NewScript(kernelsSource)

// keyspace names the Redis keys of one deployment. Every key starts with the
// hash tag {prefix}, so all the keys of a call hash to one slot of a Redis
// Cluster, and deployments with different prefixes share a server without
// sharing state.
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

// The key of each guard: one hash holding its latest time, its window (if it
// has one) and its state. The kinds differ in their first letter ("b:",
// "c:", "g:", "f:"), so no two keys of different kinds are ever equal.
func (k keyspace) budget(key string) string { return k.tag + "b:" + key }
func (k keyspace) chain(key string) string  { return k.tag + "c:" + key }
func (k keyspace) guard(name string) string { return k.tag + "g:" + name }
func (k keyspace) fleet(name string) string { return k.tag + "f:" + name }

// The sets listing the keys that stand parked or marked needs-human,
// maintained by the scripts that set and lift the marks. They never expire
// (they hold only marks that never do) and vanish when emptied.
func (k keyspace) parked() string     { return k.tag + "parked" }
func (k keyspace) needsHuman() string { return k.tag + "needs_human" }

// events is the deployment's channel of notices (sharded pub/sub,
// SSUBSCRIBE): one message "KIND KEY" for each transition that other
// replicas must see at once, published by the script that made it.
func (k keyspace) events() string { return k.tag + "events" }

// The kinds of notice, and the key each names: a budget's key (parked,
// resumed: by ResumeAt, or by Forget of a parked key), a chain's
// (needs_human, cleared: by Clear of a marked key), a fleet's name
// (fleet_tripped, fleet_rearmed: at the end of its cooldown or by Reset).
const (
	noticeParked       = "parked"
	noticeResumed      = "resumed"
	noticeNeedsHuman   = "needs_human"
	noticeCleared      = "cleared"
	noticeFleetTripped = "fleet_tripped"
	noticeFleetRearmed = "fleet_rearmed"
)

// parseNotice splits a message of the events channel into its kind and key.
func parseNotice(msg string) (kind, key string, ok bool) {
	return strings.Cut(msg, " ")
}

// kernel runs the decisions of kernels.lua for one deployment.
type kernel struct {
	rdb        redis.UniversalClient // a Client, ClusterClient or Ring
	keys       keyspace
	serverTime bool          // read the time from the server's clock (TIME), not the caller's
	grace      time.Duration // added to every TTL
	timeout    time.Duration // bounds each call
}

// run calls operation op on the guard at keys[0] (and the set of marks at
// keys[1], for a budget or a chain) at now (ignored in server-time mode) with
// the operation's own arguments, under the kernel's timeout, and returns the
// script's array reply. The key expires span plus the kernel's grace after
// the call, unless the script keeps it.
func (k *kernel) run(ctx context.Context, op string, keys []string, span time.Duration, now time.Time, args ...any) (reply, error) {
	at, err := k.nowArg(now)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	argv := make([]any, 0, 3+len(args))
	argv = append(argv, op, at, ttlMillis(span+k.grace))
	argv = append(argv, args...)
	res, err := kernels.Run(ctx, k.rdb, keys, argv...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return res, nil
}

// maxMicros bounds the times the kernels keep: 16 decimal digits of
// microseconds since the Unix epoch, up to the year 2286.
const maxMicros = 1e16

// nowArg is the time argument of a call: integer microseconds since the Unix
// epoch (a time between two microseconds is read as the earlier one), or ""
// for the server's clock. The zero time is the argument of operations that
// read no time: 0, in either mode. Another time before 1970 or after 2286 is
// an error.
func (k *kernel) nowArg(now time.Time) (any, error) {
	switch {
	case now.IsZero():
		return int64(0), nil
	case k.serverTime:
		return "", nil
	}
	us := now.UnixMicro()
	if us < 0 || us >= maxMicros {
		return nil, fmt.Errorf("time %v out of the range 1970 to 2286", now)
	}
	return us, nil
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

// fromMicros is the time of a script's microseconds.
func fromMicros(us int64) time.Time { return time.UnixMicro(us) }

// The replies of a script, read by position. A reply of another shape is a
// script and code out of step, which the tests catch: reading it gives zero
// values rather than a panic.
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

func (r reply) flag(i int) bool { return r.int(i) == 1 }

// encodeCause stores a failure as text: "" for none, else "e" and its
// message, so that a nil cause and an error with an empty message stay
// apart. Only the message crosses replicas: decodeCause gives a plain error.
func encodeCause(err error) string {
	if err == nil {
		return ""
	}
	return "e" + err.Error()
}

func decodeCause(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s[1:])
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}
