package faultrun

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop/redisstore"
	"github.com/crashloopguard/crashloop/redisstore/redistest"
	"github.com/redis/go-redis/v9"
)

var (
	flagDuration = flag.Duration("faultrun.duration", 0, "how long each seed's faults go on (default 20s, the CI run)")
	flagSeed     = flag.Uint64("faultrun.seed", 0, "run this seed alone (default: seeds 1 and 2, the CI run)")
	flagKeep     = flag.Bool("faultrun.keep", false, "keep the logs of every run, not only of a failed one")
	flagRecheck  = flag.String("faultrun.recheck", "", "check the logs a failed run kept in this folder again, instead of running")
)

const (
	replicas = 4
	keys     = 4
	timeout  = 300 * time.Millisecond
	// slack is what a decision may take beyond the timeout: the scheduling
	// of 4 replica processes and a test on a shared 2-core machine.
	slack = 200 * time.Millisecond
	// settle is how long the run goes on without faults before the
	// replicas are stopped, so that what the faults left to do is done.
	settle = 3 * time.Second
)

// TestFaultRun is the randomized fault run of docs/faults.md: 4 replica
// processes, each in a network namespace of its own, share 4 keys on a
// redis-server with AOF (appendfsync always) while faults of every kind
// are injected on a seeded schedule; then Check asserts the invariants
// over every replica's log. CI runs seeds 1 and 2 for 20s each; a longer
// run:
//
//	go test ./redisstore/internal/faultrun -run TestFaultRun -faultrun.duration=30m -faultrun.seed=7 -timeout 0
func TestFaultRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the fault run takes about 50s")
	}
	if *flagRecheck != "" {
		recheck(t, *flagRecheck)
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("faultrun: the replicas' network namespaces need root (CI runs as root); run this test as root, or with -short to leave it out")
	}
	bin := filepath.Join(t.TempDir(), "replica")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, "./replica")...).CombinedOutput(); err != nil {
		t.Fatalf("faultrun: go build ./replica: %v\n%s", err, out)
	}
	seeds, d := []uint64{1, 2}, 20*time.Second
	if *flagSeed != 0 {
		seeds = []uint64{*flagSeed}
	}
	if *flagDuration > 0 {
		d = *flagDuration
	}
	for _, seed := range seeds {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) { faultRun(t, bin, seed, d) })
	}
}

// replica is one replica process of the run.
type replica struct {
	name string
	peer *redistest.Peer
	cmd  *exec.Cmd
	done chan struct{}
	cut  bool
	seed uint64 // of its random choices
	life int    // how many times it was started before
}

func faultRun(t *testing.T, bin string, seed uint64, d time.Duration) {
	dir := t.TempDir()
	aof := filepath.Join(dir, "aof")
	if err := os.Mkdir(aof, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, redistest.InNetns(), redistest.WithAOF(aof))
	// The operator reads the parks the checker needs (before each kill of
	// Redis, and at the end): it is the harness, not under test, so it
	// waits as long as a loaded machine may need.
	op := redisstore.New(srv.Client(redisstore.BoundedOptions(&redis.Options{}, 10*time.Second)),
		redisstore.Options{Prefix: "faultrun", Timeout: 10 * time.Second})
	rs := make([]*replica, replicas)
	for i := range rs {
		rs[i] = &replica{name: fmt.Sprintf("r%d", i+1), peer: srv.Netns().AddPeer(t, i+1), seed: seed*100 + uint64(i+1)}
	}
	start := func(r *replica) {
		t.Helper()
		errs, err := os.OpenFile(filepath.Join(dir, r.name+".err"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer errs.Close()
		// ip netns exec execs the replica: the process is the replica
		r.cmd = exec.Command("ip", "netns", "exec", r.peer.NS, bin, "-redis", "redis://"+srv.Addr(), "-replica", r.name,
			"-seed", strconv.FormatUint(r.seed, 10), "-life", strconv.Itoa(r.life), "-keys", strconv.Itoa(keys),
			"-log", filepath.Join(dir, r.name+".log"), "-timeout", timeout.String())
		r.life++
		r.cmd.Stdout, r.cmd.Stderr = errs, errs
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func(c *exec.Cmd) { _ = c.Wait(); close(done) }(r.cmd)
		r.done = done
	}
	for _, r := range rs {
		start(r)
		t.Cleanup(func() {
			if r.cmd != nil {
				_ = r.cmd.Process.Kill()
				<-r.done
			}
		})
	}

	parks := func() []Park {
		t.Helper()
		ps, err := op.Parked(context.Background())
		if err != nil {
			t.Fatalf("faultrun: read the parks: %v", err)
		}
		out := make([]Park, len(ps))
		for i, p := range ps {
			out[i] = Park{Key: p.Key, Version: p.Version}
		}
		return out
	}

	// The schedule: a fault every 0.4–1.4s, the first of each kind in a
	// seeded order, then kinds at random among those that apply; each is
	// healed after a seeded while.
	rng := rand.New(rand.NewPCG(seed, 0xfa017))
	type pending struct {
		at   time.Time
		heal func()
	}
	var (
		heals   []pending
		faults  []Fault
		redisUp = true // neither stopped nor killed
	)
	order := slices.Clone(FaultKinds)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	inject := func(kind string) bool {
		now := time.Now()
		f := Fault{Kind: kind, Start: now.UnixNano()}
		idx := len(faults)
		end := func() { faults[idx].End = time.Now().UnixNano() }
		after := func(lo, hi time.Duration) time.Time { return now.Add(lo + time.Duration(rng.Int64N(int64(hi-lo)))) }
		switch kind {
		case FaultRedisStop, FaultRedisKill:
			if !redisUp {
				return false
			}
			redisUp = false
		}
		var r *replica
		if kind == FaultLinkCut || kind == FaultReplicaKill {
			var can []*replica
			for _, c := range rs {
				if !c.cut && c.cmd != nil {
					can = append(can, c)
				}
			}
			if len(can) == 0 {
				return false
			}
			r = can[rng.IntN(len(can))]
			f.Target = r.name
		}
		switch kind {
		case FaultRedisStop:
			srv.Pause()
			heals = append(heals, pending{after(100*time.Millisecond, 1500*time.Millisecond), func() { srv.Continue(); end(); redisUp = true }})
		case FaultRedisKill:
			f.Before = parks()
			f.Start = time.Now().UnixNano()
			srv.Kill()
			heals = append(heals, pending{after(100*time.Millisecond, time.Second), func() {
				srv.Restart()
				end()
				faults[idx].After = parks()
				faults[idx].AfterRead = time.Now().UnixNano()
				redisUp = true
			}})
		case FaultLinkCut:
			r.peer.Cut(t)
			r.cut = true
			heals = append(heals, pending{after(300*time.Millisecond, 3*time.Second), func() { r.peer.Mend(t); r.cut = false; end() }})
		case FaultReplicaKill:
			_ = r.cmd.Process.Kill()
			<-r.done
			r.cmd = nil
			heals = append(heals, pending{after(100*time.Millisecond, time.Second), func() { start(r); end() }})
		}
		faults = append(faults, f)
		return true
	}
	healDue := func(until time.Time) {
		for {
			i := slices.IndexFunc(heals, func(p pending) bool { return !p.at.After(until) })
			if i < 0 {
				return
			}
			h := heals[i]
			heals = slices.Delete(heals, i, i+1)
			h.heal()
		}
	}
	stopAt := time.Now().Add(d)
	next := time.Now().Add(time.Second)
	for time.Now().Before(stopAt) {
		// the schedule's own pace: sleep until the next fault or heal
		at := next
		for _, h := range heals {
			if h.at.Before(at) {
				at = h.at
			}
		}
		time.Sleep(time.Until(at))
		healDue(time.Now())
		if time.Now().Before(next) {
			continue
		}
		kinds := order
		if len(order) == 0 {
			kinds = slices.Clone(FaultKinds)
			rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		}
		for _, k := range kinds {
			if inject(k) {
				if i := slices.Index(order, k); i >= 0 {
					order = slices.Delete(order, i, i+1)
				}
				break
			}
		}
		next = time.Now().Add(400*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second))))
	}
	healDue(time.Now().Add(time.Hour)) // everything healed now
	time.Sleep(settle)                 // the run goes on without faults
	for _, r := range rs {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, r := range rs {
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("faultrun: %s did not stop within 20s of SIGTERM", r.name)
		}
		if code := r.cmd.ProcessState.ExitCode(); code != 0 {
			errs, _ := os.ReadFile(filepath.Join(dir, r.name+".err"))
			t.Fatalf("faultrun: %s exited with %d:\n%s", r.name, code, errs)
		}
		r.cmd = nil
	}

	run := Run{Faults: faults, Final: parks(), Claims: map[int64]string{}, Timeout: timeout, Slack: slack, Budget: 3, Window: time.Hour}
	for _, r := range rs {
		recs, err := ReadLog(filepath.Join(dir, r.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		run.Records = append(run.Records, recs...)
	}
	c := srv.Client(nil)
	claimKeys, err := c.Keys(context.Background(), "{faultrun}:claim:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range claimKeys {
		v, err := strconv.ParseInt(strings.TrimPrefix(k, "{faultrun}:claim:"), 10, 64)
		if err != nil {
			continue // the claim of a loss of state
		}
		run.Claims[v] = c.Get(context.Background(), k).Val()
	}
	rep := Check(run)
	t.Logf("seed %d, %v of faults: %s", seed, d, rep)
	for _, k := range FaultKinds {
		if rep.Faults[k] == 0 {
			t.Errorf("no fault of kind %s was injected", k)
		}
	}
	for i, v := range rep.Violations {
		if i == 30 {
			t.Errorf("... and %d more", len(rep.Violations)-i)
			break
		}
		t.Errorf("violation: %s", v)
	}
	if t.Failed() || *flagKeep {
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("faultrun-seed%d-%d", seed, time.Now().Unix()))
		if err := os.CopyFS(keep, os.DirFS(dir)); err == nil {
			run.Records = nil
			b, _ := json.MarshalIndent(run, "", " ")
			_ = os.WriteFile(filepath.Join(keep, "run.json"), b, 0o644)
			t.Logf("the logs are kept in %s", keep)
		}
	}
}

// recheck runs Check on the logs a failed run kept in dir.
func recheck(t *testing.T, dir string) {
	var run Run
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "r*.log"))
	for _, l := range logs {
		recs, err := ReadLog(l)
		if err != nil {
			t.Fatal(err)
		}
		run.Records = append(run.Records, recs...)
	}
	rep := Check(run)
	t.Logf("%s: %s", dir, rep)
	for _, v := range rep.Violations {
		t.Errorf("violation: %s", v)
	}
}
