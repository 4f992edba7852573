//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop/redisstore/redistest"
)

// TestReplicasShareOneBudget runs three crashloops of one key on one Redis:
// together they get the budget's three respawns, not three each. Every
// program waits until all three have started, so that each crashloop's
// first start happens before any failure; then the three respawns go to
// whichever crashloop fails first, the fourth failure parks the key, and
// every crashloop exits 86. The park is announced once, by the crashloop
// that decided it. status --redis shows it, and resume --redis from a
// fourth invocation clears it for every replica.
func TestReplicasShareOneBudget(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	starts, gate := filepath.Join(dir, "starts"), filepath.Join(dir, "gate")
	args := with("--redis="+srv.URL(), "--key=web", "--", helper, "record="+starts, "wait="+gate, "exit=1")

	var cls []*bg
	for range 3 {
		cls = append(cls, startCL(t, args...))
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, lines(c, starts), 3) }, patience, tick, "the three first starts")
	touch(t, gate)
	parks := 0
	for _, c := range cls {
		require.Equal(t, exitParked, c.wait(t), c.stderr.String())
		parks += strings.Count(c.stderr.String(), "event=agent.startup_exhausted")
	}
	assert.Len(t, lines(t, starts), 6, "three first starts and the budget's three respawns, shared")
	assert.Equal(t, 1, parks, "the park is announced once, by the crashloop that decided it")

	// A new crashloop of the key refuses to start it, and says how to resume.
	r := runCL(t, args...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, starts), 6, "a parked key is not started")
	assert.Contains(t, r.stderr, "crashloop: once the cause is fixed, run: crashloop resume --redis "+srv.URL()+" web\n")

	r = runCL(t, "status", "--redis", srv.URL(), "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st redisStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Contains(t, st.Parked, "web")
	assert.Equal(t, "respawn_budget_exhausted", st.Parked["web"].Reason)
	assert.Contains(t, st.Parked["web"].LastError, "exited with status 1")

	r = runCL(t, "resume", "--redis", srv.URL())
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "resumed web for every replica: "+resumedHow+"\n", r.stdout)
	r = runCL(t, "status", "--redis", srv.URL())
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "nothing is parked in "+srv.URL()+" (prefix crashloop)\n"), r.stdout)

	r = runCL(t, args...)
	assert.Equal(t, exitParked, r.code, r.stderr)
	assert.Len(t, lines(t, starts), 10, "a full budget again: a start and three respawns")
}

// TestStatusCountsTheDeploymentsKeys runs three crashloops of one key on
// one Redis with --on-park wait: the key parks, and each crashloop waits
// with it parked. status --redis counts the key once, not once per
// crashloop: 1 of 1 keys failing. Once they exit, the key still parked,
// no crashloop counts it.
func TestStatusCountsTheDeploymentsKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	starts, gate := filepath.Join(dir, "starts"), filepath.Join(dir, "gate")
	args := with("--redis="+srv.URL(), "--on-park=wait", "--key=web", "--max-respawns=0", "--", helper, "record="+starts, "wait="+gate, "exit=1")
	var cls []*bg
	for range 3 {
		cls = append(cls, startCL(t, args...))
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Len(c, lines(c, starts), 3) }, patience, tick, "the three first starts")
	touch(t, gate)
	for _, c := range cls {
		waitingOn(t, c)
	}
	const parked = "fleet breaker: armed; 0 restarts in the last hour; 1 of 1 keys failing\n"
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r := runCL(t, "status", "--redis", srv.URL())
		require.Equal(c, 0, r.code, r.stderr)
		assert.True(c, strings.HasSuffix(r.stdout, parked), r.stdout)
	}, patience, tick, "each crashloop's count of the key written")
	r := runCL(t, "status", "--redis", srv.URL(), "--json")
	var st redisStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Equal(t, [2]int{1, 1}, [2]int{st.Fleet.FailingKeys, st.Fleet.Keys})

	for _, c := range cls {
		c.signal(t, syscall.SIGTERM)
		assert.Equal(t, 0, c.wait(t), c.stderr.String())
	}
	r = runCL(t, "status", "--redis", srv.URL())
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.HasSuffix(r.stdout, "fleet breaker: armed; 0 restarts in the last hour; no key has reported to it yet\n"), r.stdout)
	assert.Contains(t, r.stdout, "\nweb  respawn_budget_exhausted  ", "the key stays parked")
}

// TestPrefixesSeparateDeployments: the same key under two prefixes is two
// keys.
func TestPrefixesSeparateDeployments(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	park := func(prefix string) result {
		return runCL(t, with("--redis="+srv.URL(), "--redis-prefix="+prefix, "--key=web", "--max-respawns=0", "--", helper, "record="+starts, "exit=1")...)
	}
	require.Equal(t, exitParked, park("blue").code)
	r := park("green")
	require.Equal(t, exitParked, r.code)
	assert.Len(t, lines(t, starts), 2, "green started web although blue parked it")
	r = runCL(t, "resume", "--redis", srv.URL(), "--redis-prefix", "blue", "web")
	require.Equal(t, 0, r.code, r.stderr)
	r = runCL(t, "status", "--redis", srv.URL(), "--redis-prefix", "green", "--json")
	var st redisStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Contains(t, st.Parked, "web", "resuming blue left green parked")
}

// TestRedisPasswordIsNeverShown: with a password in the URL or in
// $REDIS_PASSWORD, neither a run, nor status, nor a wrong password's error,
// nor the resume command that crashloop prints shows it.
func TestRedisPasswordIsNeverShown(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-Pa55"
	srv := redistest.Start(t, redistest.WithTCP())
	require.NoError(t, srv.Client(nil).ConfigSet(context.Background(), "requirepass", pw).Err())
	withPW := strings.Replace(srv.URL(), "redis://", "redis://:"+pw+"@", 1)
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	var outputs []string
	check := func(r result) result {
		outputs = append(outputs, r.stdout, r.stderr)
		return r
	}

	r := check(runCL(t, with("--redis="+withPW, "--key=web", "--max-respawns=0", "--", helper, "record="+starts, "exit=1")...))
	require.Equal(t, exitParked, r.code, r.stderr)
	r = check(runCL(t, with("--redis="+withPW, "--key=web", "--", helper, "record="+starts, "exit=1")...))
	require.Equal(t, exitParked, r.code, r.stderr)
	assert.Contains(t, r.stderr, "run: crashloop resume --redis "+srv.URL()+" web\n", "the URL without its password: $REDIS_PASSWORD gives it")
	require.Len(t, lines(t, starts), 1)

	cmd := command("status", "--redis", srv.URL())
	cmd.Env = append(cmd.Env, passwordEnv+"="+pw)
	r = check(runCmd(t, cmd))
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "web")

	wrong := strings.Replace(srv.URL(), "redis://", "redis://:not-"+pw+"@", 1)
	r = check(runCL(t, "status", "--redis", wrong))
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "redis://:xxxxx@")

	cmd = command("--help")
	cmd.Env = append(cmd.Env, passwordEnv+"="+pw)
	check(runCmd(t, cmd))

	for _, out := range outputs {
		assert.NotContains(t, out, pw)
	}
}

// TestParkDecidedAloneIsWrittenBack: a crashloop that cannot reach Redis
// decides alone (and says so); before exiting on its park, it writes the
// park back once Redis answers again, so that the other replicas refuse the
// key.
func TestParkDecidedAloneIsWrittenBack(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.Kill()
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	c := startCL(t, with("--redis="+srv.URL(), "--redis-timeout=50ms", "--key=web", "--", helper, "record="+starts, "exit=1")...)
	require.Eventually(t, func() bool { return strings.Contains(c.stderr.String(), "event=agent.startup_exhausted") }, patience, tick, "the park decided alone")
	assert.False(t, c.exited(), "crashloop waits to write its park back")
	assert.Len(t, lines(t, starts), 4, "a start and the budget's three respawns")
	srv.Restart()
	require.Equal(t, exitParked, c.wait(t), c.stderr.String())
	assert.Contains(t, c.stderr.String(), "event=store.unavailable")
	assert.Contains(t, c.stderr.String(), "event=store.recovered")
	assert.NotContains(t, c.stderr.String(), "pool.go", "go-redis's own log lines are silenced")

	r := runCL(t, "status", "--redis", srv.URL(), "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st redisStatus
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Contains(t, st.Parked, "web")
	assert.Equal(t, 3, st.Parked["web"].Attempts, "the respawns the budget allowed")
}

// TestRedisFlagsAreChecked: bad --redis settings are one line naming the
// setting, exit status 2, before any start.
func TestRedisFlagsAreChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis=http://example.com", "--", "true"}, "crashloop: --redis: Redis URL http://example.com: redis: invalid URL scheme: http\n"},
		{[]string{"--redis=unix:///nowhere", "--redis-timeout=0s", "--", "true"}, "crashloop: --redis-timeout: must be > 0\n"},
		{[]string{"resume", "--state=x", "--redis=unix:///nowhere"}, "crashloop: resume takes --state FILE or --redis URL, not both\n"},
		{[]string{"--redis=rediss://127.0.0.1:1", "--redis-cert=c.pem", "--", "true"}, "crashloop: --redis-cert and --redis-key: give both or neither\n"},
		{[]string{"--redis=redis://127.0.0.1:1", "--redis-ca=ca.pem", "--", "true"}, "crashloop: --redis-ca, --redis-cert: need a rediss:// --redis URL\n"},
		{[]string{"status", "--redis=rediss://127.0.0.1:1", "--redis-ca=/nowhere/ca.pem"},
			"crashloop: --redis-ca: Redis URL rediss://127.0.0.1:1: CA file: open /nowhere/ca.pem: no such file or directory\n"},
		{[]string{"--redis=redis://127.0.0.1:1/0?password=s3cret&bogus=1", "--", "true"},
			"crashloop: --redis: Redis URL redis://127.0.0.1:1/0?bogus=1&password=xxxxx: redis: unexpected option: bogus, password\n"},
		{[]string{"--redis=redis://127.0.0.1:1/0?master_name=m&password=s3cret&bogus=1", "--", "true"},
			"crashloop: --redis: Redis URL redis://127.0.0.1:1/0?bogus=1&master_name=m&password=xxxxx: redis: unexpected option: bogus\n"},
	} {
		r := runCL(t, tc.args...)
		assert.Equal(t, exitUsage, r.code, tc.args)
		assert.True(t, strings.HasPrefix(r.stderr, tc.want), "%v: %q", tc.args, r.stderr)
	}
}

// touch creates file.
func touch(t *testing.T, file string) {
	t.Helper()
	require.NoError(t, os.WriteFile(file, nil, 0o644))
}

// TestRedisShapes: crashloop --redis works against a Redis Cluster node
// (found from the server, with a plain URL), through Sentinel, and over TLS with a CA file and
// a client certificate: a park is shared, status shows it, resume clears it.
func TestRedisShapes(t *testing.T) {
	t.Parallel()
	pki := redistest.NewPKI(t)
	cluster := redistest.Start(t, redistest.WithTCP(), redistest.WithCluster())
	tlsSrv := redistest.Start(t, redistest.WithTCP(), redistest.WithTLS(pki.Server()))
	sentinel := redistest.StartSentinel(t)
	for _, tc := range []struct {
		name  string
		redis []string
	}{
		{"cluster", []string{"--redis=" + cluster.URL()}},
		{"sentinel", []string{"--redis=" + sentinel.URL()}},
		{"tls", []string{"--redis=rediss://" + tlsSrv.TLSAddr(), "--redis-ca=" + pki.CA, "--redis-cert=" + pki.ClientCert, "--redis-key=" + pki.ClientKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			starts := filepath.Join(t.TempDir(), "starts")
			args := append(append([]string{}, tc.redis...), "--key=web", "--max-respawns=0", "--", helper, "record="+starts, "exit=1")
			r := runCL(t, with(args...)...)
			require.Equal(t, exitParked, r.code, r.stderr)
			assert.NotContains(t, r.stderr, "store.unavailable")
			assert.NotContains(t, r.stderr, "store.misconfigured")
			r = runCL(t, with(args...)...)
			require.Equal(t, exitParked, r.code, r.stderr)
			assert.Len(t, lines(t, starts), 1, "the park is shared: no second start")
			r = runCL(t, append([]string{"status", "--json"}, tc.redis...)...)
			require.Equal(t, 0, r.code, r.stderr)
			var st redisStatus
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
			assert.Equal(t, []string{"web"}, keysOf(st.Parked))
			r = runCL(t, append(append([]string{"resume"}, tc.redis...), "web")...)
			require.Equal(t, 0, r.code, r.stderr)
		})
	}
}

// TestRedisMisconfigurationIsLogged: a server that may evict the shared
// state is named at start, at ERROR, with what to change.
func TestRedisMisconfigurationIsLogged(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(nil)
	require.NoError(t, c.ConfigSet(context.Background(), "maxmemory", "1000000000").Err())
	require.NoError(t, c.ConfigSet(context.Background(), "maxmemory-policy", "allkeys-lru").Err())
	r := runCL(t, with("--redis="+srv.URL(), "--key=web", "--", helper, "exit=0")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "Redis is misconfigured for the store (eviction): maxmemory is 1000000000 with maxmemory-policy allkeys-lru, which may evict the store's parks and windows: set maxmemory-policy noeviction (or maxmemory 0)")
}

// keysOf returns the keys of m, sorted.
func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// redisStatus is the document of status --redis --json, with its parks by
// key.
type redisStatus struct {
	Parked map[string]testPark
	Fleet  struct {
		FailingKeys int `json:"failing_keys"`
		Keys        int `json:"total_keys"`
	}
}

// testPark is a park of a JSON document.
type testPark struct {
	Key        string `json:"key"`
	Reason     string `json:"reason"`
	Attempts   int    `json:"attempts"`
	LastError  string `json:"last_error"`
	ExitCode   *int   `json:"exit_code"`
	Signal     string `json:"signal"`
	StderrTail string `json:"stderr_tail"`
}

func (s *redisStatus) UnmarshalJSON(b []byte) error {
	var doc struct {
		Parks []testPark `json:"parks"`
		Fleet json.RawMessage
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	s.Parked = map[string]testPark{}
	for _, p := range doc.Parks {
		s.Parked[p.Key] = p
	}
	return json.Unmarshal(doc.Fleet, &s.Fleet)
}
