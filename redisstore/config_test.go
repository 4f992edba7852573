package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/crashloopguard/crashloop/share/ledgertest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// steps records the script and function calls a client sends but those
// refused with NOSCRIPT (sent again with EVAL) or for a function not loaded
// (sent again once it is): for each, the keys' count and the arguments
// after the keys. It is a go-redis hook, safe for concurrent use.
type steps struct {
	mu   sync.Mutex
	sent [][]string // each: the keys' count, then the arguments after the keys
}

func (r *steps) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *steps) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *steps) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "evalsha" || name == "eval" || name == "fcall") &&
			(err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") && err.Error() != "ERR Function not found") {
			args := cmd.Args() // EVALSHA sha (FCALL name) numkeys keys... args...
			var out []string
			for _, a := range args[2:] {
				out = append(out, fmt.Sprint(a))
			}
			r.mu.Lock()
			r.sent = append(r.sent, out)
			r.mu.Unlock()
		}
		return err
	}
}

// take returns the calls sent since the last take: the operation of each,
// and the arguments after the keys of the last one.
func (r *steps) take() ([]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ops, last []string
	for _, c := range r.sent {
		var n int
		_, _ = fmt.Sscan(c[0], &n)
		last = c[1+n:]
		ops = append(ops, last[0])
	}
	r.sent = nil
	return ops, last
}

// A Store's configuration is stored once, under its digest: a step sends
// what changes only (a judge step 9 arguments after its 6 keys). A step
// that finds the configuration missing (its key deleted alone, or gone
// with the server's state) changes nothing and fails, and the Store writes
// the configuration and sends the step again, once; a loss of the state
// is still found first, and told.
func TestConfigurationStoredOnce(t *testing.T) {
	s := redistest.Start(t)
	st := replicasOn(t, s, 1, Options{})[0]
	cfg := crashloop.SupervisorConfig{Budget: crashloop.BudgetConfig{MaxRespawns: 3, Window: time.Minute}}
	require.NoError(t, st.Open(cfg, nil))
	sent := &steps{}
	st.rdb.AddHook(sent)
	rdb := s.Client(nil)
	ctx := context.Background()
	judge := func() share.Verdict {
		t.Helper()
		v, err := st.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingFailedStart, Incarnation: "k#1",
			Cause: "boom", Now: time.Now()})
		require.NoError(t, err)
		return v
	}
	p := st.plan.Load()
	var want []byte
	for _, v := range []uint64{2, 3, 60_000_000, 0, 0, 0, 0, 0, 0, 0, 0, math.Float64bits(1), 0, 120_000, 120_000, 0, 0, 0, 0, 0, 0} {
		want = binary.BigEndian.AppendUint64(want, v)
	}
	require.Equal(t, string(want), p.config, "the format's version, the budget, no other guard, a fraction of 1, the TTLs, no probe, no shared cause")

	require.Equal(t, 1, judge().Attempt)
	ops, args := sent.take()
	require.Equal(t, []string{"epoch", "judge", "config", "judge"}, ops, "the first judge step found no configuration")
	require.Equal(t, []string{"judge", st.epoch, "", "failed_start", "0", "k#1", "eboom", "", st.origin}, args)
	require.Equal(t, p.config, rdb.Get(ctx, p.key).Val())
	require.Equal(t, 2, judge().Attempt)
	ops, _ = sent.take()
	require.Equal(t, []string{"judge"}, ops)

	// The configuration deleted alone: the step refused changes nothing.
	require.NoError(t, rdb.Del(ctx, p.key).Err())
	before := dump(t, rdb, st.keys.tag)
	_, err := st.eval(ctx, []string{st.keys.record("k"), st.keys.fleet(), st.keys.parked(), st.keys.held(), st.keys.causes(), p.key},
		[]any{"judge", st.epoch, "", "failed_start", 0, "k#1", "eboom", "", st.origin})
	require.EqualError(t, err, "crashloop: no_config")
	require.Equal(t, before, dump(t, rdb, st.keys.tag))
	require.Equal(t, 3, judge().Attempt, "counted once")
	ops, _ = sent.take()
	require.Equal(t, []string{"judge", "judge", "config", "judge"}, ops)
	require.Equal(t, p.config, rdb.Get(ctx, p.key).Val())

	// Everything lost: the loss is found and told first, then the
	// configuration is written again on the new state.
	old, fresh := st.epoch, st.freshEpoch()
	require.NoError(t, rdb.FlushAll(ctx).Err())
	_, err = st.Judge(ctx, share.Judgment{Key: "k", Ending: share.EndingFailedStart, Incarnation: "k#1", Now: time.Now()})
	var sl *share.StateLostError
	require.ErrorAs(t, err, &sl)
	require.NotEqual(t, old, sl.Epoch)
	require.Equal(t, fresh, sl.Epoch, "the epoch the Store made, not the refused step")
	require.Equal(t, sl.Epoch, st.epoch)
	require.Equal(t, []string{"{" + st.o.Prefix + "}:claim:lost:" + sl.Epoch, st.keys.epoch()}, keysOf(t, rdb),
		"the refused step wrote nothing; the Store made the epoch, and claimed the loss")
	require.Equal(t, 1, judge().Attempt, "the windows restart with the state")
	ops, _ = sent.take()
	require.Equal(t, []string{"judge", "epoch", "claim", "judge", "config", "judge"}, ops)
	require.Equal(t, p.config, rdb.Get(ctx, p.key).Val())
}

// dump is every key under tag with its value (DUMP), to compare states.
func dump(t *testing.T, rdb *redis.Client, tag string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keysOf(t, rdb) {
		if strings.HasPrefix(k, tag) {
			v, err := rdb.Dump(context.Background(), k).Result()
			require.NoError(t, err)
			out[k] = v
		}
	}
	return out
}

// keysOf lists the server's keys, sorted.
func keysOf(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	ks, err := rdb.Keys(context.Background(), "*").Result()
	require.NoError(t, err)
	slices.Sort(ks)
	return ks
}

// Two Stores of one deployment with different configurations each judge
// by their own, stored side by side under the deployment's hash tag (a
// cluster node runs the steps: their keys share a slot).
func TestTwoConfigurationsOnOneDeployment(t *testing.T) {
	s := redistest.Start(t, redistest.WithCluster())
	sts := replicasOn(t, s, 2, Options{ClientTime: true})
	strict, lax := ledgertest.Config(), ledgertest.Config()
	strict.Budget.MaxRespawns, lax.Budget.MaxRespawns = 2, 5
	require.NoError(t, sts[0].Open(strict, nil))
	require.NoError(t, sts[1].Open(lax, nil))
	ctx := context.Background()
	j := share.Judgment{Key: "k", Ending: share.EndingFailedStart, Incarnation: "k#1", Now: ledgertest.T0}
	for i := range 3 {
		v, err := sts[1].Judge(ctx, j)
		require.NoError(t, err)
		require.Equal(t, i+1, v.Attempt)
	}
	v, err := sts[0].Judge(ctx, j)
	require.NoError(t, err)
	require.NotNil(t, v.Park)
	require.Equal(t, "respawn_budget_exhausted", v.Park.Reason)
	require.Equal(t, 3, v.Park.Attempts)
	a, b := sts[0].plan.Load(), sts[1].plan.Load()
	require.NotEqual(t, a.key, b.key)
	rdb := s.Client(nil)
	for _, p := range []*plan{a, b} {
		require.True(t, strings.HasPrefix(p.key, sts[0].keys.tag+"cfg:"), p.key)
		require.Equal(t, p.config, rdb.Get(ctx, p.key).Val())
	}
}
