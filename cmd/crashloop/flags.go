//go:build unix

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore"
)

// settings are the flags of crashloop supervising a program. A new flag is a
// field here, a line in newSettings, a place in helpSections, and its use in
// superviseCmd (a new subsystem builds its crashloop.Option there, in
// newSupervisor).
type settings struct {
	fs *flagSet

	// The supervisor (config.go turns them into a SupervisorConfig).
	maxRespawns        int
	window             time.Duration
	initialBackoff     time.Duration
	maxBackoff         time.Duration
	backoff            string
	jitter             string
	healthyAfter       time.Duration
	chainMax           int
	chainGap           time.Duration
	guard              string
	hourlyCap          int
	probeAfter         time.Duration // --probe-after
	probeMax           time.Duration // --probe-max
	restart            string
	permanentExitCodes string               // every --permanent-exit-codes, comma-separated (for replay)
	exitRules          []crashloop.ExitRule // --on-exit and --permanent-exit-codes, in the order given
	config             string
	configDoc          any // the JSON document of --config, once read

	// The program.
	key       string
	chdir     string
	env       envFlag
	grace     time.Duration
	watchdog  time.Duration
	tailLines int // --stderr-tail-lines
	tailBytes int // --stderr-tail-bytes
	health    healthConfig

	// crashloop.
	state       string
	redis       redisConfig
	logFormat   string
	metricsAddr string
	onPark      string // exit or wait
	onParkExec  string
	onTripExec  string
	hookTimeout time.Duration
	adminToken  string // --admin-token-file
	version     bool
}

// newSettings registers the flags with their defaults.
func newSettings() *settings {
	d := crashloop.DefaultSupervisorConfig()
	s := &settings{fs: newFlagSet("crashloop")} // errors are reported as one line, help by printHelp
	fs := s.fs
	fs.Int(&s.maxRespawns, "max-respawns", d.Budget.MaxRespawns, "respawns allowed in the rolling --window; the next failed start parks the program")
	fs.Duration(&s.window, "window", d.Budget.Window, "the rolling window of the respawn budget")
	fs.Duration(&s.initialBackoff, "initial-backoff", d.Budget.InitialBackoff, "wait before the first respawn; the Nth waits N times as long")
	fs.Duration(&s.maxBackoff, "max-backoff", d.Budget.MaxBackoff, "the longest wait between starts")
	fs.String(&s.backoff, "backoff", "linear", "the `CURVE` of the waits: linear, or exponential (doubling from --initial-backoff to --max-backoff)")
	fs.String(&s.jitter, "jitter", "none", "randomize the waits by `KIND`: none, full, equal or decorrelated")
	fs.Duration(&s.healthyAfter, "healthy-after", d.HealthyAfter, "a run this long, or one that sent READY=1, was a healthy start; 0: only READY=1 is")
	fs.Int(&s.chainMax, "chain-max", d.Chain.MaxChain, "failures after healthy runs, each within --chain-gap of the last, before giving up; 0: off")
	fs.Duration(&s.chainGap, "chain-gap", d.Chain.ResetGap, "a longer gap between failures after healthy runs ends the chain")
	fs.String(&s.guard, "guard", "off", "fast restart-loop guard over every restart: off, on (3/60s) or `N/DURATION`")
	fs.Int(&s.hourlyCap, "hourly-cap", 0, "park after `N` restarts in a rolling hour; 0: off")
	fs.String(&s.restart, "restart", "on-failure", "restart `POLICY`: on-failure, or always to restart after exit status 0 too")
	fs.Duration(&s.probeAfter, "probe-after", 0, "after a park (for any reason but permanent_error), start the program once as a probe after this long, then after twice that, up to --probe-max; a healthy probe resumes it; 0: off, a park waits for an operator")
	fs.Duration(&s.probeMax, "probe-max", 0, "the longest wait between two probes (default 16 x --probe-after)")
	fs.Var(onExitValue{&s.exitRules}, "on-exit", "what an end of the program does, `MATCH=ACTION` (repeatable, first match wins): MATCH is exit statuses (3, 64-78, 1,2,5-9), a signal (SIGSEGV or SEGV) or oom (the kernel's OOM killer, read from the program's memory cgroup); ACTION is restart (the guards judge it), park (at once), stop (crashloop ends with the program's status) or planned (restart at once, no budget spent), such as 78=park or SIGKILL=stop", repeatable)
	fs.Var(permanentValue{&s.exitRules, &s.permanentExitCodes}, "permanent-exit-codes", "comma-separated exit statuses (`CODES`) that park at once, such as 78,125: shorthand for --on-exit CODES=park", repeatable)
	fs.Var((*stringValue)(&s.config), "config", "JSON supervisor configuration `FILE` (every setting: the fleet breaker and its hold on a shared cause, \"fleet\": {\"shared_cause\": {...}}, too; at most 1 MiB, once); each flag given overrides its setting", once)
	fs.String(&s.key, "key", "", "the program's stable identity in events and the state file (default: its name and a hash of the command line)")
	fs.String(&s.chdir, "chdir", "", "run the program in `DIR`")
	fs.Var(&s.env, "env", "set `KEY=VALUE` in the program's environment (repeatable)", repeatable|padded)
	fs.Duration(&s.grace, "grace", 10*time.Second, "how long a stopping program may take before SIGKILL")
	fs.String(&s.health.cmd, "health-cmd", "", "check the program's health with sh -c `CMD` (exit status 0: healthy), as Docker's HEALTHCHECK does; --health-retries failures in a row stop it (SIGTERM, SIGKILL after --grace) and count a failure; a passing check makes the run healthy, as READY=1 does")
	fs.Duration(&s.health.interval, "health-interval", 30*time.Second, "the time between two health checks, the first one after the start")
	fs.Duration(&s.health.timeout, "health-timeout", 30*time.Second, "a health check that runs longer fails")
	fs.Int(&s.health.retries, "health-retries", 3, "health checks that fail in a row to make the program unhealthy")
	fs.Duration(&s.health.startPeriod, "health-start-period", 0, "failed health checks this soon after the start do not count, until one passes")
	fs.Int(&s.tailLines, "stderr-tail-lines", defaultTailLines, "keep the last `N` lines the program wrote on stderr for its park (stderr still passes through); 0: off, the program gets crashloop's stderr itself")
	fs.Int(&s.tailBytes, "stderr-tail-bytes", defaultTailBytes, "keep at most `N` bytes of the stderr tail (at most 1048576); 0: off")
	fs.Duration(&s.watchdog, "watchdog", 0, "stop the program (SIGABRT, then SIGKILL) when it sends no WATCHDOG=1 for this long, and count a failure; 0: off")
	fs.String(&s.state, "state", "", "keep parked marks in `FILE`, across crashloop restarts and reboots; one crashloop per --key")
	fs.String(&s.redis.url, "redis", "", "share the guards' state with every crashloop of the same --key through Redis at `URL` (redis://, rediss://, unix:///path, a cluster node, or Sentinel with ?master_name=NAME; password from the URL or $REDIS_PASSWORD)")
	fs.String(&s.redis.prefix, "redis-prefix", "crashloop", "the deployment's `NAME` on Redis: crashloops of one deployment share it")
	fs.Duration(&s.redis.timeout, "redis-timeout", redisstore.DefaultTimeout, "the longest one decision waits for Redis before deciding alone")
	s.redis.tlsFlags(fs)
	fs.String(&s.logFormat, "log-format", "text", "log lines on stderr in `FORMAT`: text or json")
	fs.String(&s.metricsAddr, "metrics-addr", "", "serve /metrics (Prometheus), /status (JSON), /healthz and /readyz (200 while the program runs healthy, 503 otherwise), read-only, on `ADDR` such as 127.0.0.1:9464; off by default (crashloop help endpoints)")
	fs.String(&s.onPark, "on-park", "exit", "on a park, `ACTION`: exit (status 86), or wait with the program stopped, serving --metrics-addr, until a resume starts it again; wait needs --state, --redis or --admin-token-file, the ways to resume it")
	fs.String(&s.onParkExec, "on-park-exec", "", "run sh -c `CMD` once per park (by the one replica that announces it), with CRASHLOOP_KEY, CRASHLOOP_REASON, CRASHLOOP_EXIT_CODE, CRASHLOOP_SIGNAL, CRASHLOOP_LAST_ERROR, CRASHLOOP_STDERR_TAIL, CRASHLOOP_ATTEMPTS and CRASHLOOP_SINCE in its environment")
	fs.String(&s.onTripExec, "on-trip-exec", "", "run sh -c `CMD` once per trip of the fleet breaker, as --on-park-exec, with CRASHLOOP_FAILING and CRASHLOOP_TOTAL too")
	fs.Duration(&s.hookTimeout, "hook-timeout", 30*time.Second, "stop an --on-park-exec or --on-trip-exec command that runs longer (TERM to its process group, KILL a second later)")
	fs.String(&s.adminToken, "admin-token-file", "", "with --on-park wait and --metrics-addr: serve POST /resume to requests with the header \"Authorization: Bearer TOKEN\", TOKEN read from `FILE` (at most 4 KiB)")
	fs.Bool(&s.version, "version", false, "print crashloop's version and exit")
	fs.hint("key", "leave --key out for a key derived from the command line")
	return s
}

// helpSections orders the flags in --help.
var helpSections = []struct {
	title string
	flags []string
}{
	{"When to give up", []string{"max-respawns", "window", "initial-backoff", "max-backoff", "backoff", "jitter", "healthy-after",
		"chain-max", "chain-gap", "guard", "hourly-cap", "restart", "probe-after", "probe-max", "on-exit", "permanent-exit-codes", "config"}},
	{"The program", []string{"key", "chdir", "env", "grace", "watchdog", "health-cmd", "health-interval", "health-timeout", "health-retries",
		"health-start-period", "stderr-tail-lines", "stderr-tail-bytes"}},
	{"crashloop", []string{"state", "redis", "redis-prefix", "redis-timeout", "redis-ca", "redis-cert", "redis-key", "log-format", "metrics-addr", "on-park", "on-park-exec", "on-trip-exec", "hook-timeout", "admin-token-file", "version"}},
}

const helpIntro = `crashloop runs a program and restarts it when it fails, with a backoff
between starts, until a guard decides that it is crash-looping and parks it
instead of restarting it forever.

Usage:
  crashloop [flags] -- PROGRAM [ARGS...]
  crashloop status --state FILE | --redis URL [--json]
  crashloop resume --state FILE | --redis URL [KEY]
  crashloop replay [--config FILE]... HISTORY...              (see crashloop replay --help)
  crashloop simulate [--crash-after D] [--outage D] [--json]  (see crashloop simulate --help)
  crashloop tune [--config FILE]... [--write FILE] HISTORY... (see crashloop tune --help)
  crashloop plan [policy flags | --config FILE] [--json]      (see crashloop plan --help)
  crashloop help [TOPIC]
  crashloop --version
`

const helpOutro = `
Signals: HUP, USR1, USR2, WINCH and QUIT are forwarded to the program's
process group. The first INT or TERM stops the program the same way (SIGKILL
after --grace) and ends crashloop with its status; a second one kills it at
once. While the program is parked under --on-park wait, INT or TERM end
crashloop with status 0. The program gets NOTIFY_SOCKET (systemd's notify protocol): READY=1
marks a run healthy, STATUS=... is logged, WATCHDOG=1 feeds --watchdog.

Examples:
  Restart a server when it crashes; give up after 3 failed starts in a minute:
    crashloop --key api -- ./api --port 8080
  A container entrypoint whose parks survive restarts of the container:
    crashloop --state /data/crashloop.json --key worker -- /app/worker
  A daemon that says when it is ready; only READY=1 makes a run healthy:
    crashloop --healthy-after 0 -- redis-server --supervised systemd
  A program that sends WATCHDOG=1; stopped and restarted when it hangs:
    crashloop --watchdog 30s -- ./worker
  Replicas of one service sharing one budget on Redis:
    REDIS_PASSWORD=... crashloop --redis redis://redis.internal:6379 --key web -- ./web
  Exit status 78 means a bad configuration: park at once, and on an OOM kill:
    crashloop --on-exit 78=park --on-exit oom=park -- ./server
  What a policy does before deploying it (its schedule, outages, warnings):
    crashloop plan --max-respawns 10 --window 10m --initial-backoff 2s
  What is parked, and resuming it once the cause is fixed:
    crashloop status --state /data/crashloop.json
    crashloop resume --state /data/crashloop.json worker
  A container entrypoint that stays up, scraped and probed, when it parks:
    crashloop --on-park wait --state /data/crashloop.json --key worker --metrics-addr :9464 -- /app/worker
  A park that tries again by itself: a probe start 30s after it, then 1m,
  2m... up to 8m; a healthy probe resumes it:
    crashloop --on-park wait --state /data/crashloop.json --probe-after 30s --probe-max 8m -- ./server
`

// printHelp writes --help: usage, the flags by section, signals, examples
// and exit statuses.
func (s *settings) printHelp(w io.Writer) {
	fmt.Fprint(w, helpIntro)
	for _, sec := range helpSections {
		fmt.Fprintf(w, "\n%s:\n", sec.title)
		for _, name := range sec.flags {
			f := s.fs.Lookup(name)
			arg, usage := flag.UnquoteUsage(f)
			switch arg {
			case "value":
				arg = " " + strings.ToUpper(name)
				switch f.Value.(flag.Getter).Get().(type) {
				case int:
					arg = " N"
				case time.Duration:
					arg = " DURATION"
				}
			case "":
			default:
				arg = " " + arg
			}
			fmt.Fprintf(w, "  --%s%s\n", name, arg)
			if def := f.DefValue; def != "" && def != "0" && def != "0s" && def != "false" {
				usage += " (default " + def + ")"
			}
			fmt.Fprintf(w, "        %s\n", usage)
		}
	}
	fmt.Fprint(w, helpOutro)
	fmt.Fprintln(w)
	printExitStatuses(w)
}

// parseSupervise reads the flags before "--" and the program after it.
// done is true when it has printed --help or --version. Once the flags are
// read, under --log-format json, out prints JSON: every later error is a
// JSON record too.
func parseSupervise(args []string, stdout io.Writer, out *output) (s *settings, argv []string, done bool, err error) {
	flagArgs, argv, dashes := args, []string(nil), false
	for i, a := range args {
		if a == "--" {
			flagArgs, argv, dashes = args[:i], args[i+1:], true
			break
		}
	}
	s = newSettings()
	if err := s.fs.Parse(flagArgs); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			s.printHelp(stdout)
			return s, nil, true, nil
		}
		return nil, nil, false, flagError(s.fs.FlagSet, flagArgs, err)
	}
	if s.version {
		fmt.Fprintln(stdout, "crashloop", version())
		return s, nil, true, nil
	}
	if s.logFormat == "json" {
		out.json = newLogger(s.logFormat, out.stderr)
	}
	switch {
	case !dashes:
		return nil, nil, false, usagef("missing -- before the program (usage: crashloop [flags] -- PROGRAM [ARGS...])")
	case s.fs.NArg() > 0:
		return nil, nil, false, usagef("unexpected argument %q before -- (usage: crashloop [flags] -- PROGRAM [ARGS...])", s.fs.Arg(0))
	case len(argv) == 0 || argv[0] == "":
		return nil, nil, false, usagef("no program after -- (usage: crashloop [flags] -- PROGRAM [ARGS...])")
	}
	return s, argv, false, s.check()
}

// invalidValue matches the flag package's error for a value its flag
// rejected.
var invalidValue = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-([^:]+): (.*)$`)

// flagError turns an error of the flag package, which parsed args, into
// one line that names the flag as the user typed it, with one dash or two:
// "--window: "soon" is not a duration such as 60s or 500ms", "unknown flag
// -z".
func flagError(fs *flag.FlagSet, args []string, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return usagef("unknown flag %s (see crashloop --help)", typedAs(args, name))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return usagef("%s needs a value", typedAs(args, name))
	}
	m := invalidValue.FindStringSubmatch(msg)
	if m == nil {
		return usagef("%s (see crashloop --help)", msg)
	}
	value, name, reason := m[1], m[2], m[3]
	if sv, ok := fs.Lookup(name).Value.(*strictValue); ok && sv.err != "" {
		return usagef("%s: %s", typedAs(args, name), sv.err)
	}
	return usagef("%s: %s %s", typedAs(args, name), value, reason)
}

// typedAs returns flag name as args spell it, "-z" or "--z": the flag
// package reports it without its dashes, and stops at the first flag in
// error, so the first match is the one it read.
func typedAs(args []string, name string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") { // a flag's value
			continue
		}
		dashes := "-"
		if strings.HasPrefix(a, "--") {
			dashes = "--"
		}
		if n, _, _ := strings.Cut(a[len(dashes):], "="); n == name {
			return dashes + name
		}
	}
	return "--" + name
}

// badValue is a flag value crashloop rejects: `--name: "value" reason`.
func badValue(name, value, reason string) error {
	return usagef("--%s: %q %s", name, value, reason)
}

// check validates the values the flag package cannot.
func (s *settings) check() error {
	switch {
	case s.backoff != "linear" && s.backoff != "exponential":
		return badValue("backoff", s.backoff, "is not linear or exponential")
	case s.jitter != "none" && s.jitter != "full" && s.jitter != "equal" && s.jitter != "decorrelated":
		return badValue("jitter", s.jitter, "is not none, full, equal or decorrelated")
	case s.isSet("key") && checkKey(s.key) != "":
		return usagef("--key: %s (leave --key out for a key derived from the command line)", checkKey(s.key))
	case s.chainMax < 0:
		return usagef("--chain-max: must be >= 0 (0: off)")
	case s.restart != "on-failure" && s.restart != "always":
		return badValue("restart", s.restart, "is not on-failure or always")
	case s.grace < 0:
		return usagef("--grace: must be >= 0")
	case s.health.interval < time.Millisecond:
		return usagef("--health-interval: must be at least 1ms")
	case s.health.timeout < time.Millisecond:
		return usagef("--health-timeout: must be at least 1ms")
	case s.health.retries < 1:
		return usagef("--health-retries: must be >= 1")
	case s.health.startPeriod < 0:
		return usagef("--health-start-period: must be >= 0")
	case s.tailLines < 0:
		return usagef("--stderr-tail-lines: must be >= 0 (0: off)")
	case s.tailBytes < 0 || s.tailBytes > maxTailBytes:
		return usagef("--stderr-tail-bytes: must be from 0 (off) to %d", maxTailBytes)
	case s.watchdog < 0 || (s.watchdog > 0 && s.watchdog < time.Millisecond):
		return usagef("--watchdog: must be 0 (off) or at least 1ms")
	case s.logFormat != "text" && s.logFormat != "json":
		return badValue("log-format", s.logFormat, "is not text or json")
	case s.redis.timeout <= 0:
		return usagef("--redis-timeout: must be > 0")
	case s.hookTimeout <= 0:
		return usagef("--hook-timeout: must be > 0")
	case s.onPark != "exit" && s.onPark != "wait":
		return badValue("on-park", s.onPark, "is not exit or wait")
	case s.adminToken != "" && s.onPark != "wait":
		return usagef("--admin-token-file: only with --on-park wait (it serves the resume of a waiting crashloop)")
	case s.adminToken != "" && s.metricsAddr == "":
		return usagef("--admin-token-file: needs --metrics-addr, the address that serves POST /resume")
	case s.onPark == "wait" && s.state == "" && s.redis.url == "" && s.adminToken == "":
		return usagef("--on-park wait: needs --state, --redis or --admin-token-file, or nothing could resume the program")
	}
	if err := redisOnly(s.fs, s.redis.url); err != nil {
		return err
	}
	if err := checkAddr(s.metricsAddr); err != nil {
		return err
	}
	if _, err := parseGuard(s.guard); err != nil {
		return err
	}
	if s.chdir != "" {
		if fi, err := os.Stat(s.chdir); err != nil || !fi.IsDir() {
			return usagef("--chdir %s: not a folder", s.chdir)
		}
	}
	return nil
}

// parseGuard reads --guard: off, on or N/DURATION.
func parseGuard(v string) (*crashloop.GuardConfig, error) {
	switch v {
	case "off":
		return nil, nil
	case "on":
		g := crashloop.DefaultGuardConfig()
		return &g, nil
	}
	n, d, ok := strings.Cut(v, "/")
	max, err1 := strconv.Atoi(n)
	window, err2 := time.ParseDuration(d)
	if !ok || err1 != nil || err2 != nil {
		return nil, badValue("guard", v, "is not off, on or N/DURATION such as 3/60s")
	}
	return &crashloop.GuardConfig{MaxRestarts: max, Window: window}, nil
}

// parseExitCodes reads --permanent-exit-codes.
func parseExitCodes(v string) (map[int]bool, error) {
	codes := map[int]bool{}
	if v == "" {
		return codes, nil
	}
	for _, f := range strings.Split(v, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > 255 {
			return nil, badValue("permanent-exit-codes", f, "is not an exit status from 1 to 255")
		}
		codes[c] = true
	}
	return codes, nil
}

// envFlag collects the repeated --env KEY=VALUE.
type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, " ") }

func (e *envFlag) Set(v string) error {
	k, _, ok := strings.Cut(v, "=")
	switch {
	case !ok || k == "":
		return errors.New("is not KEY=VALUE")
	case k == "NOTIFY_SOCKET" || k == "WATCHDOG_USEC" || k == "WATCHDOG_PID":
		return errors.New("is not allowed: crashloop sets " + k + " itself")
	}
	*e = append(*e, v)
	return nil
}

// programEnv returns the program's environment: crashloop's own, then
// --env (a later KEY replaces an earlier one), then NOTIFY_SOCKET and, with
// --watchdog, WATCHDOG_USEC (the shim adds WATCHDOG_PID). The notify
// variables that crashloop's own service manager gave it are not passed on,
// nor NOTIFY_SOCKET when notifySocket is "" (there is none).
func (s *settings) programEnv(notifySocket string) []string {
	env := withoutEnv(withoutEnv(withoutEnv(os.Environ(), "WATCHDOG_USEC"), "WATCHDOG_PID"), "NOTIFY_SOCKET")
	for _, kv := range s.env {
		env = setEnv(env, kv)
	}
	if notifySocket != "" {
		env = setEnv(env, "NOTIFY_SOCKET="+notifySocket)
	}
	if s.watchdog > 0 {
		env = setEnv(env, "WATCHDOG_USEC="+strconv.FormatInt(s.watchdog.Microseconds(), 10))
	}
	return env
}

// setEnv returns env with kv, a KEY=VALUE, in place of any value of KEY.
func setEnv(env []string, kv string) []string {
	k, _, _ := strings.Cut(kv, "=")
	return append(withoutEnv(env, k), kv)
}

// withoutEnv returns env without the variable key.
func withoutEnv(env []string, key string) []string {
	return slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
}

// defaultKey derives a stable key from the command line: the program's base
// name and a short hash of the whole argv, such as "sh-3f2a9c1e".
func defaultKey(argv []string) string {
	h := sha256.Sum256([]byte(strings.Join(argv, "\x00")))
	return filepath.Base(argv[0]) + "-" + hex.EncodeToString(h[:4])
}

// checkAddr checks --metrics-addr: HOST:PORT, or :PORT, with a decimal
// port from 0 to 65535 (0: any free port). "" is off.
func checkAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return badValue("metrics-addr", addr, "is not HOST:PORT or :PORT, such as 127.0.0.1:9464")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || !decimal.MatchString(port) || n > 65535 {
		return badValue("metrics-addr", addr, "has no port number from 0 to 65535")
	}
	return nil
}
