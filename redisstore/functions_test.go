package redisstore

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/crashloopguard/crashloop/share"
	"github.com/crashloopguard/crashloop/share/ledgertest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// calls returns how many times the server of c ran each command, by its
// name in INFO commandstats (evalsha, fcall, function|load).
func calls(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`cmdstat_([a-z|]+):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

// judgeThrice judges three failed starts of key on st, a second apart,
// and requires the budget's attempts 1, 2 and 3: each step ran once.
func judgeThrice(t *testing.T, st *Store, key string, between func()) {
	t.Helper()
	for i := range 3 {
		if i > 0 {
			between()
		}
		v, err := st.Judge(context.Background(), share.Judgment{Key: key, Ending: share.EndingFailedStart, Incarnation: key,
			Now: ledgertest.T0.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
		require.Equal(t, i+1, v.Attempt, "judge %d", i+1)
	}
}

// The steps that judge are one FCALL each: the library is loaded once, by
// the first step that finds it missing, and again after the server lost it
// (FUNCTION FLUSH: a restart without persistence); a step that found no
// function ran nothing. The other steps stay scripts.
func TestDecisionsAreFunctionCalls(t *testing.T) {
	s := redistest.Start(t)
	admin := s.Client(nil)
	ctx := context.Background()
	st := replicasOn(t, s, 1, Options{ClientTime: true})[0]
	cfg := crashloop.SupervisorConfig{Budget: crashloop.BudgetConfig{MaxRespawns: 10, Window: time.Hour}}
	require.NoError(t, st.Open(cfg, nil))
	_, err := st.Parked(ctx) // a script step: learns the epoch
	require.NoError(t, err)
	require.NoError(t, admin.ConfigResetStat(ctx).Err())
	flushed := false
	judgeThrice(t, st, "k", func() {
		if !flushed {
			require.NoError(t, admin.FunctionFlush(ctx).Err())
			flushed = true
		}
	})
	got := calls(t, admin)
	// The first judge: no function, loaded, no configuration (written by
	// a script step), judged; the second: no function, loaded, judged; the
	// third: judged.
	require.Equal(t, 2, got["function|load"], "loaded at the first step and after the flush")
	require.Equal(t, 6, got["fcall"], "%v", got)
	require.Equal(t, 1, got["evalsha"], "the configuration's write: %v", got)
	libs, err := admin.FunctionList(ctx, redis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	require.Len(t, libs, 1)
	require.Equal(t, script.name, libs[0].Name)
	require.Equal(t, script.name, libs[0].Functions[0].Name)
	_, err = st.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, 2, calls(t, admin)["evalsha"], "a lookup is a script")
}

// On a server without functions (before Redis 7.0: FCALL is an unknown
// command), and for a user that may not call or load them, every step is
// a script, with the same answers.
func TestDecisionsWithoutFunctions(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		s := redistest.Start(t, redistest.WithoutFunctions())
		scriptsOnly(t, s.Client(nil), replicasOn(t, s, 1, Options{ClientTime: true})[0])
	})
	for _, deny := range []string{"-fcall", "-function"} {
		t.Run("user "+deny, func(t *testing.T) {
			s := redistest.Start(t)
			admin := s.Client(nil)
			require.NoError(t, admin.Do(context.Background(), "ACL", "SETUSER", "user", "on", ">pw", "~*", "&*", "+@all", deny).Err())
			st := New(s.Client(BoundedOptions(&redis.Options{Username: "user", Password: "pw"}, 5*time.Second)),
				Options{Prefix: newPrefix(), ClientTime: true})
			t.Cleanup(func() { _ = st.Close() })
			scriptsOnly(t, admin, st)
		})
	}
}

// scriptsOnly judges thrice on st and requires that the server of admin
// ran no function.
func scriptsOnly(t *testing.T, admin *redis.Client, st *Store) {
	t.Helper()
	cfg := crashloop.SupervisorConfig{Budget: crashloop.BudgetConfig{MaxRespawns: 10, Window: time.Hour}}
	require.NoError(t, st.Open(cfg, nil))
	_, err := st.Parked(context.Background())
	require.NoError(t, err)
	require.NoError(t, admin.ConfigResetStat(context.Background()).Err())
	judgeThrice(t, st, "k", func() {})
	got := calls(t, admin)
	require.LessOrEqual(t, got["fcall"], 1, "at most the first step's, which found no function: %v", got)
	require.True(t, st.scripts.Load(), "the store noted that it runs scripts only")
	// the first judge found no configuration: written, and sent again
	require.Equal(t, 3+2, got["evalsha"], "%v", got)
}
