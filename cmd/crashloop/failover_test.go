//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop/redisstore/redistest"
)

// recoveryBound is the longest a crashloop may take, from the kill of the
// master of its deployment's slot to store.recovered: the failover (the
// test deployments detect the death within 500ms and promote the replica
// about a second after the kill), then the Supervisor's next ask (every
// second while Run runs the program), on a cluster client whose map of slots is at most a second
// old or a Sentinel client that asks the sentinel. Measured with -race,
// 20 runs each: 2.00–3.00s on the cluster, 1.00–2.11s through Sentinel.
// The bound leaves room for a loaded machine.
const recoveryBound = 10 * time.Second

// failoverPrefixes numbers the deployments of TestRedisFailover.
var failoverPrefixes atomic.Int64

// TestRedisFailover: a crashloop on a 3-master Redis Cluster with a replica
// each, and one through Sentinel, survives the death (SIGKILL) of the
// master that holds its deployment. While the master is gone it decides
// alone (store.unavailable, once); once the replica is promoted it uses it
// again (store.recovered, once, within recoveryBound), and keeps
// supervising. A park made before the failover is still refused by a new
// crashloop, and a park made after it is shared: status shows both.
func TestRedisFailover(t *testing.T) {
	t.Parallel()
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := redistest.StartCluster(t, 3, 1)
		// The deployment's slot is the first master's, whose URL the
		// supervising crashloop was given: its seed dies too.
		prefix := fmt.Sprint("failover", failoverPrefixes.Add(1))
		for cl.Owner(t, "{"+prefix+"}") != cl.Masters[0] {
			prefix = fmt.Sprint("failover", failoverPrefixes.Add(1))
		}
		// The crashloops started after the kill take a live node's URL, as
		// an operator would.
		failover(t, prefix, cl.URL(), cl.Masters[1].URL(), cl.Masters[0])
	})
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		s := redistest.StartSentinel(t)
		failover(t, "failover", s.URL(), s.URL(), s.Master)
	})
}

// failover runs the scenario of TestRedisFailover on the deployment at url
// whose master, which holds prefix's slot, is master; after is a URL that
// still reaches the deployment once master is dead.
//
// The supervised program runs until the test lets its Nth run fail (it
// creates the file failN), as a service does: crashloop decides only when
// it ends. Its first run fails right after the kill, long before the
// replica can be promoted (cluster-node-timeout and Sentinel's
// down-after-milliseconds are 500ms): that decision finds no master, and
// crashloop decides alone. The second run then keeps running: no decision
// comes to find Redis back, and crashloop must find it on its own.
func failover(t *testing.T, prefix, url, after string, master *redistest.Server) {
	dir := t.TempDir()
	redisFlags := func(url string) []string { return []string{"--redis=" + url, "--redis-prefix=" + prefix} }

	// A park before the failover, on the replica too before the kill
	// (replication is asynchronous: an unreplicated write dies with its
	// master, which is Redis's doing, not crashloop's).
	parkedStarts := filepath.Join(dir, "parked-starts")
	r := runCL(t, with(append(redisFlags(url), "--key=parked", "--max-respawns=0", "--", helper, "record="+parkedStarts, "exit=1")...)...)
	require.Equal(t, exitParked, r.code, r.stderr)
	mc := redis.NewClient(master.Options(nil))
	require.Equal(t, int64(1), mc.Wait(context.Background(), 1, 5*time.Second).Val(), "the replica has the park")
	require.NoError(t, mc.Close())

	starts := filepath.Join(dir, "starts")
	fail := func(n int) { touch(t, filepath.Join(dir, fmt.Sprint("fail", n))) }
	program := fmt.Sprintf(`echo >> %[1]s; exec %[2]s wait=%[3]s/fail$(wc -l < %[1]s) exit=1`, starts, helper, dir)
	c := startCL(t, with(append(redisFlags(url), "--log-format=json", "--key=web", "--", "sh", "-c", program)...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the supervising crashloop's log:\n%s", c.stderr.String())
		}
	})
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.False(ct, c.exited())
		assert.Len(ct, lines(ct, starts), 1)
	}, patience, tick, "the first start")

	master.Kill()
	killed := time.Now()
	fail(1)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.False(ct, c.exited())
		assert.Len(ct, lines(ct, starts), 2)
	}, patience, tick, "the second start, decided alone")
	var recovered time.Time
	require.Eventually(t, func() bool {
		for _, ev := range storeEvents(t, c) {
			if ev.Event == "store.recovered" {
				recovered = ev.Time
				return true
			}
		}
		return c.exited()
	}, patience, tick, "store.recovered while the program runs")
	require.False(t, c.exited())
	took := recovered.Sub(killed)
	t.Logf("store.recovered %v after the kill", took.Round(time.Millisecond))
	require.Less(t, took, recoveryBound)

	// It keeps supervising, on the shared state: the next failure is a
	// decision on Redis, which announces nothing about the store.
	fail(2)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.False(ct, c.exited())
		assert.Len(ct, lines(ct, starts), 3)
	}, patience, tick, "the third start")
	var kinds []string
	for _, ev := range storeEvents(t, c) {
		kinds = append(kinds, ev.Event)
	}
	require.Equal(t, []string{"store.unavailable", "store.recovered"}, kinds, "one outage, announced once, then the recovery")

	// The park made before the failover stands on the promoted replica: a
	// new crashloop refuses the key without starting it.
	r = runCL(t, with(append(redisFlags(after), "--key=parked", "--", helper, "record="+parkedStarts, "exit=0")...)...)
	require.Equal(t, exitParked, r.code, r.stderr)
	assert.Contains(t, r.stderr, "crashloop: parked is parked since ")
	assert.Len(t, lines(t, parkedStarts), 1, "the parked key was not started again")

	// A park made after the failover is shared.
	r = runCL(t, with(append(redisFlags(after), "--key=later", "--max-respawns=0", "--", helper, "exit=1")...)...)
	require.Equal(t, exitParked, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "event=store.", "decided on the shared state")
	r = runCL(t, append([]string{"status", "--json"}, redisFlags(after)...)...)
	require.Equal(t, 0, r.code, r.stderr)
	var st struct {
		Parks []struct{ Key, Reason string } `json:"parks"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Len(t, st.Parks, 2, r.stdout)
	assert.Equal(t, "later", st.Parks[0].Key)
	assert.Equal(t, "parked", st.Parks[1].Key)
	assert.Equal(t, "respawn_budget_exhausted", st.Parks[0].Reason)

	c.signal(t, syscall.SIGTERM)
	c.wait(t)
}

// storeEvent is a store.* event of crashloop's JSON log.
type storeEvent struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"`
}

// storeEvents returns the store.* events that crashloop c logged so far,
// in order.
func storeEvents(t tb, c *bg) []storeEvent {
	t.Helper()
	var out []storeEvent
	sc := bufio.NewScanner(strings.NewReader(c.stderr.String()))
	for sc.Scan() {
		var ev storeEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil && strings.HasPrefix(ev.Event, "store.") {
			out = append(out, ev)
		}
	}
	return out
}
