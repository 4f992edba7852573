package redisstore

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// mutants are hand mutations of store.lua, each a textual replacement of
// one place in it (old must occur exactly once), that the tests in
// mutantTests must catch: a mutant they let through is a rule of the
// script that no test holds. docs/redis.md lists them with what caught
// each.
var mutants = []struct{ name, old, new string }{
	{"prune: a time exactly a window old drops out (> for >=)",
		"tonumber(string.sub(w, i, i + 15))) > span do", "tonumber(string.sub(w, i, i + 15))) >= span do"},
	{"the fleet's hour drops a time exactly an hour old (its packed times read 1µs early)",
		"(ref - struct.unpack('>I4', w, i))", "(ref - struct.unpack('>I4', w, i) + 1)"},
	{"the fleet's hour never pruned (at a step's start)",
		"f.w = prune(f.w, math.max(now, f.t), HOUR, f.t)", "f.w = f.w"},
	{"the restart count grows only on failed starts",
		"  r.n = r.n + 1\n", "  if ending == 'failed_start' then r.n = r.n + 1 end\n"},
	{"Healthy ignored",
		"if A.healthy == 1 or ending == 'clean' then", "if ending == 'clean' then"},
	{"the deployment's time not written with client clocks",
		"local v = '\\3' .. f.ts .. mid", "local v = '\\3' .. (A.now ~= '' and string.sub(redis.call('GET', tag .. 'fleet') or string.rep('0', 17), 2, 17) or f.ts) .. mid"},
	{"the deployment's time not written at the server's time (the deleted budget step's rule)",
		"local v = '\\3' .. f.ts .. mid", "local v = '\\3' .. (A.now == '' and string.sub(redis.call('GET', tag .. 'fleet') or string.rep('0', 17), 2, 17) or f.ts) .. mid"},
	{"the record written without its TTL",
		"redis.call('SET', key, renc(r), 'PX', ttl)", "redis.call('SET', key, renc(r))"},
	{"the fleet string written without its TTL",
		"redis.call('SET', tag .. 'fleet', v, 'PX', ttl)", "redis.call('SET', tag .. 'fleet', v)"},
	{"a park written with an expiry",
		"  if r.p or r.cause ~= '' then\n    redis.call('SET', key, renc(r))\n",
		"  if r.p or r.cause ~= '' then\n    redis.call('SET', key, renc(r), 'PX', 60000)\n"},
	{"the budget parks one respawn late (>= for >)",
		"if n >= C.budget_max then", "if n > C.budget_max then"},
	{"the chain breaks a microsecond early (<= for <)",
		"t - tonumber(r.c.last) <= C.chain_gap_us then", "t - tonumber(r.c.last) < C.chain_gap_us then"},
	{"the chain ignores the incarnation",
		"r.c and r.c.inc == inc and t -", "r.c and t -"},
	{"a planned restart does not end the chain",
		"r.c = false -- a planned restart ends the chain", "r.c = r.c"},
	{"the breaker re-arms a microsecond late (< for <=)",
		"if not f.tripped or t - f.since < C.cooldown_us then", "if not f.tripped or t - f.since <= C.cooldown_us then"},
	{"the release of held restarts starts a gap late",
		"string.format('%d', (i - 1) * gap)", "string.format('%d', i * gap)"},
	{"a park does not count its own key as failing",
		"f.total, f.failing = total + 1, failing + 1", "f.total, f.failing = total + 1, failing"},
	{"a key counts once per replica that counts it",
		"if key ~= skip and not live[key] then", "if key ~= skip then"},
	{"a parked key does not count as failing",
		"if redis.call('SISMEMBER', tag .. 'parked', key) == 1 then", "if false then"},
	{"the member set written without its TTL",
		"    redis.call('PEXPIRE', K1, A.ttl_ms)\n", ""},
	{"changes written over a member set that expired",
		"elseif n ~= A.expect then", "elseif false then"},
	{"a hold may wait 0 (at least 1ns dropped)",
		"return math.max(1, C.cooldown_ns", "return math.max(0, C.cooldown_ns"},
	{"a held restart waits on at its turn (> for >=)",
		"if left > 0 then", "if left >= 0 then"},
	{"the server clock's microseconds not zero-padded",
		"nows = tm[1] .. string.sub('00000' .. tm[2], -6)", "nows = tm[1] .. tm[2]"},
	{"a claim made again by its holder loses (SET NX alone)",
		"(holder or A.replica) == A.replica and 1 or 0", "not holder and 1 or 0"},
	{"a write-back's claim holds its writer",
		"redis.call('SET', tag .. 'claim:' .. p.version, '', 'EX', CLAIM_TTL)",
		"redis.call('SET', tag .. 'claim:' .. p.version, A.replica, 'EX', CLAIM_TTL)"},
	{"the record read ahead is judged after a re-arm rewrote it",
		"RECORD = nil -- the record read ahead", "RECORD = RECORD -- the record read ahead"},
	{"a park's probe claimed without moving the next (a second replica probes at once)",
		"r.probes, r.probe, v.probe = r.probes + 1, t, 1", "r.probes, r.probe, v.probe = r.probes + 1, r.probe, 1"},
	{"a park for a permanent error gets probes",
		"reason ~= 'permanent_error' and reason ~= 'needs_human' and t", "reason ~= 'needs_human' and t"},
	{"the chain's park gets probes",
		"reason ~= 'permanent_error' and reason ~= 'needs_human' and t", "reason ~= 'permanent_error' and t"},
	{"a shared cause never holds",
		"local held = c.held or #notes >= C.cause_keys", "local held = c.held"},
	{"a cause's failed probe does not end its probe",
		"if pass == 1 and key and not healthy and c.prober == key then", "if false then"},
	{"a cause's probe goes without moving its slot",
		"c.slot, c.prober, c.probed, v.probe = t, key, t, 1", "c.prober, c.probed, v.probe = key, t, 1"},
	{"the full cause table drops its newest cause not held",
		"o.last < CS[drop].last", "o.last >= CS[drop].last"},
	{"the cause table keeps 65 causes",
		"if #CS >= 64 then", "if #CS >= 65 then"},
	{"a step that finds no epoch makes one before it refuses (the rule before the configuration was stored)",
		"return redis.error_reply('crashloop: state_lost ' .. (cur or ''))",
		"if not cur then redis.call('SET', tag .. 'epoch', 'made') end return redis.error_reply('crashloop: state_lost ' .. (cur or ''))"},
}

// mutantTests are the tests each mutant runs against, in stages, the
// quickest first: a mutant caught by one stage runs no other.
var mutantTests = []string{"^(TestKeysAndExpiry|TestServerTime|TestMembersWrittenWhole|TestConfigurationStoredOnce)$", "^TestConformance$", "^TestConformanceServerTime$"}

// mutantEnv names the mutant a test process runs with (see TestMain).
const mutantEnv = "REDISSTORE_MUTANT"

// mutate returns src with mutant name applied.
func mutate(src, name string) (string, error) {
	for _, m := range mutants {
		if m.name == name {
			if n := strings.Count(src, m.old); n != 1 {
				return "", fmt.Errorf("mutant %q: its text occurs %d times in store.lua, want once", name, n)
			}
			return strings.Replace(src, m.old, m.new, 1), nil
		}
	}
	return "", fmt.Errorf("no mutant %q", name)
}

// applyMutant runs this test process with the mutant that mutantEnv names,
// if any: every Store then runs the mutated script.
func applyMutant() error {
	name := os.Getenv(mutantEnv)
	if name == "" {
		return nil
	}
	src, err := mutate(storeSource, name)
	if err != nil {
		return err
	}
	storeSource, script = src, newProgram(src)
	return nil
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// The hand-mutation check: each mutant of store.lua makes mutantTests
// fail. Each runs in test processes of its own (this test binary, with
// mutantEnv set), which stop at their first failure; the test logs which
// test caught each mutant. It takes 45-55s under -race on a shared 2-core
// machine, so it is part of every run but -short (docs/redis.md).
func TestMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("the hand-mutation check runs test processes for each mutant")
	}
	for _, m := range mutants {
		if _, err := mutate(storeSource, m.name); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range mutants {
		start := time.Now()
		caught, err := runMutant(m.name)
		if err != nil {
			t.Errorf("mutant %q: %v", m.name, err)
			continue
		}
		t.Logf("%s: caught by %s (%v)", m.name, caught, time.Since(start).Round(100*time.Millisecond))
	}
}

// runMutant runs the stages of mutantTests with mutant name until one
// fails, and returns the test that caught it: the innermost that failed
// (a stage stops at its first failure).
func runMutant(name string) (string, error) {
	for _, tests := range mutantTests {
		cmd := exec.Command(os.Args[0], "-test.run="+tests, "-test.failfast", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), mutantEnv+"="+name)
		out, err := cmd.CombinedOutput()
		if err == nil {
			continue
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			return "", fmt.Errorf("%s: %v\n%s", tests, err, tail(out))
		}
		caught := ""
		for _, sub := range failLine.FindAllStringSubmatch(string(out), -1) {
			if strings.Count(sub[1], "/") >= strings.Count(caught, "/") {
				caught = sub[1]
			}
		}
		if caught == "" {
			return "", fmt.Errorf("%s failed, but no test said so:\n%s", tests, tail(out))
		}
		return caught, nil
	}
	return "", errors.New("survived every test")
}

// tail is the end of a test process's output, for a failure message.
func tail(out []byte) string {
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return string(out)
}
