package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/seam"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/crashloopguard/crashloop/share/ledgertest"
	"github.com/stretchr/testify/require"
)

// verdictReply is a judge reply of a new park, as store.lua writes one
// (held and wait_ns left out, as 0), with the fields in extra appended.
func verdictReply(extra ...any) []any {
	return append([]any{"now", int64(1_000_000), "new_park", int64(1), "attempt", int64(0), "restarts", int64(3),
		"park", []any{"key", "k", "reason", "respawn_budget_exhausted", "attempts", int64(2), "since", int64(999_999), "cause", "eboom",
			"version", int64(5)},
		"tripped", []any{"reason", "fleet_failing_fraction", "restarts", int64(4), "failing", int64(2), "total", int64(3)},
		"rearmed", []any{"reason", "fleet_restart_rate", "restarts", int64(8), "failing", int64(0), "total", int64(1)}},
		extra...)
}

// without returns reply r without its field name.
func without(r []any, name string) []any {
	var out []any
	for i := 0; i < len(r); i += 2 {
		if r[i] != name {
			out = append(out, r[i], r[i+1])
		}
	}
	return out
}

// with returns reply r with field name set to v (added when r has none).
func with(r []any, name string, v any) []any {
	out := append([]any(nil), r...)
	for i := 0; i < len(out); i += 2 {
		if out[i] == name {
			out[i+1] = v
			return out
		}
	}
	return append(out, name, v)
}

// A reply of the shape store.lua writes is read field by field.
func TestReadVerdict(t *testing.T) {
	v, err := readVerdict(verdictReply(), "k", time.Time{})
	require.NoError(t, err)
	require.Equal(t, time.UnixMicro(1_000_000), v.Now)
	require.EqualError(t, v.Park.LastError, "boom")
	v.Park.LastError = nil
	require.Equal(t, &crashloop.ParkedError{Key: "k", Reason: crashloop.ReasonBudgetExhausted, Attempts: 2,
		Since: time.UnixMicro(999_999), Version: 5}, v.Park)
	v.Park = nil
	require.Equal(t, share.Verdict{Now: time.UnixMicro(1_000_000), NewPark: true, Restarts: 3,
		Tripped: &share.FleetChange{Reason: "fleet_failing_fraction", Restarts: 4, Failing: 2, Total: 3},
		Rearmed: &share.FleetChange{Reason: "fleet_restart_rate", Restarts: 8, Total: 1}}, v)

	// The time of a client-time call is kept as given; the optional fields
	// may be left out.
	given := ledgertest.T0.Add(time.Nanosecond)
	v, err = readVerdict([]any{"now", int64(5), "new_park", int64(0), "held", int64(1), "attempt", int64(0),
		"restarts", int64(1), "wait_ns", int64(30)}, "k", given)
	require.NoError(t, err)
	require.Equal(t, share.Verdict{Now: given, Restarts: 1, Held: true, Wait: 30}, v)

	// A probe and a shared cause: probe_ns is the next probe's wait from
	// the verdict's time, negative when it is overdue.
	v, err = readVerdict(verdictReply("cause", "db refused", "cause_held", []any{"cause", "db refused", "keys", int64(3)},
		"cause_released", []any{"cause", "disk N full", "keys", int64(2)}, "probe", int64(1), "probe_ns", int64(-2500)), "k", time.Time{})
	require.NoError(t, err)
	require.Equal(t, "db refused", v.Cause)
	require.Equal(t, &seam.CauseChange{Cause: "db refused", Keys: 3}, v.CauseHeld)
	require.Equal(t, &seam.CauseChange{Cause: "disk N full", Keys: 2}, v.CauseReleased)
	require.True(t, v.Probe)
	require.Equal(t, time.UnixMicro(1_000_000).Add(-2500), v.ProbeAt)
}

// A reply of another shape than the one read is an error matching
// errBadReply that says what is wrong, never zero values.
func TestWrongShapedReplies(t *testing.T) {
	good := verdictReply()
	park := func(kv ...any) []any {
		p := []any{"key", "k", "reason", "permanent_error", "attempts", int64(0), "since", int64(1), "cause", "",
			"version", int64(3)}
		for i := 0; i < len(kv); i += 2 {
			p = with(p, kv[i].(string), kv[i+1])
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		reply any
		want  string
	}{
		{"a string", "OK", `the string "OK", want an array of name/value pairs`},
		{"nil", nil, `nil, want an array of name/value pairs`},
		{"an integer", int64(1), `the integer 1, want an array of name/value pairs`},
		{"odd length", []any{"now"}, `an array of 1, want name/value pairs`},
		{"a name that is no string", []any{int64(1), int64(2)}, `a name that is the integer 1`},
		{"unknown field", verdictReply("surprise", int64(1)), `unknown field "surprise"`},
		{"a report, which no step writes", verdictReply("report", "4,2"), `unknown field "report"`},
		{"a field twice", verdictReply("now", int64(2)), `field "now" twice`},
		{"missing field", without(good, "restarts"), `no field "restarts"`},
		{"string for integer", with(good, "restarts", "3"), `field "restarts": the string "3", want an integer`},
		{"flag out of range", with(good, "held", int64(2)), `field "held": the integer 2, want 0 or 1`},
		{"held without a wait", with(good, "held", int64(1)), `held true with a wait of 0s`},
		{"a wait, not held", with(good, "wait_ns", int64(5)), `held false with a wait of 5ns`},
		{"park of another key", with(good, "park", park("key", "other")), `field "park": the park of "other", want "k"'s`},
		{"park without reason", with(good, "park", park("reason", "")), `field "park": a park without a reason`},
		{"park with a bad cause", with(good, "park", park("cause", "boom")), `field "park": cause "boom": want '' or 'e' and its text`},
		{"park missing a field", with(good, "park", without(park(), "since")), `field "park": no field "since"`},
		{"park not an object", with(good, "park", "k"), `field "park": the string "k", want an array of name/value pairs`},
		{"trip with an unknown field", with(good, "tripped", []any{"why", "x"}), `field "tripped": unknown field "why"`},
		{"re-arm missing a field", with(good, "rearmed", []any{"reason", "x"}), `field "rearmed": no field "restarts"`},
		{"a new park without its park", without(good, "park"), `a new park without its park`},
		{"a cause that is no string", with(good, "cause", int64(1)), `field "cause": the integer 1, want a string`},
		{"a cause held without its keys", with(good, "cause_held", []any{"cause", "db"}), `field "cause_held": no field "keys"`},
		{"a cause released with an unknown field", with(good, "cause_released", []any{"why", "x"}), `field "cause_released": unknown field "why"`},
		{"a probe flag out of range", with(good, "probe", int64(2)), `field "probe": the integer 2, want 0 or 1`},
		{"a probe time that is no integer", with(good, "probe_ns", "5"), `field "probe_ns": the string "5", want an integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := readVerdict(tc.reply, "k", time.Time{})
			require.EqualError(t, err, tc.want)
			require.Equal(t, share.Verdict{}, v)
			err = badReply("judge", err)
			require.ErrorIs(t, err, errBadReply)
			require.EqualError(t, err, "redisstore: judge: reply of the wrong shape: "+tc.want)
		})
	}

	_, _, err := readStands([]any{"version", int64(3), "park", park(), "now", int64(1)}, "k", "")
	require.EqualError(t, err, `unknown field "now"`)
	_, _, err = readStands([]any{"park", park()}, "k", "")
	require.EqualError(t, err, `no field "version"`)
	_, _, err = readStands([]any{"version", int64(3)}, "k", "applied")
	require.EqualError(t, err, `no field "applied"`)
	ch, applied, err := readStands([]any{"applied", int64(1), "version", int64(4)}, "k", "applied")
	require.NoError(t, err)
	require.True(t, applied)
	require.Equal(t, share.Change{Key: "k", Version: 4}, ch)
	_, err = readParked([]any{park(), "k"})
	require.EqualError(t, err, `park 1: the string "k", want an array of name/value pairs`)
	_, err = readParked(map[any]any{})
	require.EqualError(t, err, `a map[interface {}]interface {}, want an array of parks`)
	one := []*crashloop.ParkedError{{Key: "k"}}
	_, err = readRestored("1", one)
	require.EqualError(t, err, `the string "1", want an array of 1`)
	_, err = readRestored([]any{[]any{"written", int64(1), "version", int64(4)}}, one)
	require.EqualError(t, err, `park 0: written, but not parked`)
	fleet := []any{"tripped", int64(0), "since", int64(0), "failing", int64(0), "total", int64(0), "hour", int64(0),
		"per_hour", int64(8), "cooldown_ns", int64(1), "now", int64(1), "held_causes", []any{}}
	_, err = readFleet(without(fleet, "now"))
	require.EqualError(t, err, `no field "now"`)
	_, err = readFleet(with(fleet, "cooldown_ns", "1"))
	require.EqualError(t, err, `field "cooldown_ns": the string "1", want an integer`)
	_, err = readFleet(without(fleet, "held_causes"))
	require.EqualError(t, err, `no field "held_causes"`)
	_, err = readFleet(with(fleet, "held_causes", "db"))
	require.EqualError(t, err, `field "held_causes": the string "db", want an array`)
	_, err = readFleet(with(fleet, "held_causes", []any{"db", int64(1)}))
	require.EqualError(t, err, `field "held_causes": the integer 1, want a string`)
	f, err := readFleet(fleet)
	require.NoError(t, err)
	require.Equal(t, fleetReply{since: time.UnixMicro(0), perHour: 8, cooldown: 1}, f)
	f, err = readFleet(with(fleet, "held_causes", []any{"disk N full", "db refused"}))
	require.NoError(t, err)
	require.Equal(t, []string{"db refused", "disk N full"}, f.heldCauses, "sorted")
}

// Every method of a Store fails loudly on a reply of the wrong shape: here
// a script out of step with the code, whatever the operation.
func TestStoreRefusesWrongShapedReplies(t *testing.T) {
	s := redistest.Start(t)
	st := replicasOn(t, s, 1, Options{ClientTime: true})[0]
	_, err := st.Parked(context.Background()) // learns the deployment's epoch with the real script
	require.NoError(t, err)
	st.script = newProgram(`local function main() return {'surprise', 1} end
if not redis.register_function then return main() end`)
	require.NoError(t, st.Open(ledgertest.Config(), nil))
	ctx := context.Background()
	now := ledgertest.T0
	check := func(op, want string, err error) {
		t.Helper()
		require.ErrorIs(t, err, errBadReply)
		require.EqualError(t, err, "redisstore: "+op+": reply of the wrong shape: "+want)
	}
	_, err = st.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingCrash, Incarnation: "i", Now: now})
	check("judge", `unknown field "surprise"`, err)
	_, err = st.Proceed(ctx, "k", now)
	check("proceed", `unknown field "surprise"`, err)
	_, err = st.Lookup(ctx, "k")
	check("lookup", `unknown field "surprise"`, err)
	_, _, err = st.Resume(ctx, "k", 1, now)
	check("resume", `unknown field "surprise"`, err)
	_, err = st.Forget(ctx, "k", 0)
	check("forget", `unknown field "surprise"`, err)
	_, err = st.Restore(ctx, nil)
	check("restore", `an array of 2, want an array of 0`, err)
	_, err = st.Parked(ctx)
	check("parked", `park 0: the string "surprise", want an array of name/value pairs`, err)
	_, err = st.Fleet(ctx, now)
	check("fleet", `unknown field "surprise"`, err)
	_, err = New(testClient(t, s), Options{Prefix: newPrefix(), ClientTime: true}).Fleet(ctx, now)
	require.NoError(t, err, "the real script, for contrast")
}

// The script refuses arguments of another shape by name, and a Judgment
// whose Ending is none of the library's never reaches it.
func TestScriptRefusesWrongArguments(t *testing.T) {
	s := redistest.Start(t)
	st := replicasOn(t, s, 1, Options{ClientTime: true})[0]
	ctx := context.Background()
	keys := []string{st.keys.record("k")}
	_, err := st.Parked(ctx) // learns the deployment's epoch
	require.NoError(t, err)
	epoch := st.epoch
	cfg, err := newPlan(ledgertest.Config(), st.keys)
	require.NoError(t, err)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{nil, "crashloop: unknown operation nil"},
		{[]any{"jugde"}, "crashloop: unknown operation jugde"},
		{[]any{"lookup"}, "crashloop: lookup: 0 arguments, want 1"},
		{[]any{"lookup", "e", ""}, "crashloop: lookup: 2 arguments, want 1"},
		{[]any{"resume", "e", "origin"}, "crashloop: resume: 2 arguments, want 3"},
		{[]any{"resume", "e", "a", "-1"}, "crashloop: resume: argument version: -1 is not a whole number"},
		{[]any{"judge", "e", "", "crash", "yes", "i", "", "", "o"}, "crashloop: judge: argument healthy: yes is not a number"},
		{[]any{"judge", "e", "", "crash", "1", "i", "", "o"}, "crashloop: judge: 7 arguments, want 8"},
		{[]any{"fleet_read", "e", "123"}, "crashloop: fleet_read: argument now: 123 is not a time ('' or 16 digits)"},
		{[]any{"members", "e", "r", "-1", "0", "0", "0"}, "crashloop: members: argument ttl_ms: -1 is not a whole number"},
		{[]any{"members", "e", "r", "1", "0", "0"}, "crashloop: members: 5 arguments, want 6"},
		{[]any{"config", "e"}, "crashloop: config: 1 arguments, want 2"},
		{[]any{"config", epoch, cfg.config[:167]}, "crashloop: config: not a configuration of format 2"},
		{[]any{"config", epoch, cfg.config[:7] + "\x01" + cfg.config[8:]}, "crashloop: config: not a configuration of format 2"},
		{[]any{"members", epoch, "r", "1", "0", "0", "2", "a"}, "crashloop: members: 2 keys added of 1"},
		{[]any{"lookup", "another"}, "crashloop: state_lost " + epoch},
	} {
		_, err := st.script.run(ctx, st.rdb, new(atomic.Bool), keys, tc.args)
		require.EqualError(t, err, tc.want, "%q", tc.args)
	}
	require.NoError(t, st.Open(ledgertest.Config(), nil))
	_, err = st.Judge(ctx, share.Judgment{Key: "k", Now: ledgertest.T0})
	require.EqualError(t, err, "redisstore: judge: Judgment.Ending Ending(0): not an ending of the library")
	require.False(t, errors.Is(err, errBadReply))
}
