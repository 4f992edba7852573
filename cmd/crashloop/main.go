// Command crashloop supervises any process with the crashloop library: it
// restarts the command when it fails, waits a backoff between starts, and
// stops for good (parks it) when a guard gives up, instead of restarting it
// all night.
//
// Usage:
//
//	crashloop [flags] -- CMD [ARGS...]
//	crashloop resume --state FILE [KEY]
//	crashloop status --state FILE
//
// CMD runs with crashloop's stdin, stdout and stderr. It is restarted when it
// exits non-zero or is killed by a signal; a command that cannot be started
// at all (not found, not executable) is a failed start like any other. Exit
// status 0 ends crashloop with 0 (unless --restart=always). SIGINT and
// SIGTERM are forwarded to the command; crashloop waits for it (--grace,
// default 10s, then SIGKILL) and exits with its status. On Linux the command
// is also killed if crashloop itself dies.
//
// Exit status: the command's own status after a clean exit or a forwarded
// signal (128+N when it was killed by signal N); 86 when a guard gave up or
// the state file says the command is parked; 2 for bad usage or a malformed
// config or state file; 1 for other errors.
//
// The flags set the respawn budget (--max-respawns 3, --window 60s,
// --initial-backoff 500ms, --max-backoff 5s), --healthy-after (10s), the
// chain (--chain-max 3, --chain-gap 20m; --chain-max=0 turns it off), the
// fast guard (--guard off, on or N/DURATION), --hourly-cap (0: off), the
// curve (--backoff linear or exponential, --jitter none, full, equal or
// decorrelated), --restart (on-failure or always), --permanent-exit-codes,
// --key (default: the program's name and a hash of the command line) and
// --grace. The fleet breaker and every other setting of the library's
// SupervisorConfig are read from a JSON file with --config FILE; flags
// override it. --state FILE keeps parked marks across crashloop restarts, in
// a file locked with flock (Unix only); "crashloop resume" clears a mark and
// "crashloop status" prints the file. Event lines go to stderr
// (--log-format=text|json). Run crashloop -h for the list of flags.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crashloopguard/crashloop"
)

// Exit statuses of crashloop itself.
const (
	exitError  = 1  // an error that is not the user's input
	exitUsage  = 2  // bad flags, config or state file
	exitParked = 86 // a guard gave up, or the state file says parked
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is bad input: a one-line message and exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func run(args []string, stdout, stderr io.Writer) int {
	code, err := dispatch(args, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "crashloop: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		if code == 0 {
			code = exitError
		}
	}
	return code
}

func dispatch(args []string, stdout, stderr io.Writer) (int, error) {
	if len(args) > 0 {
		switch args[0] {
		case "resume":
			return resumeCmd(args[1:], stdout)
		case "status":
			return statusCmd(args[1:], stdout)
		}
	}
	return superviseCmd(args, stdout, stderr)
}

const usageText = `usage:
  crashloop [flags] -- CMD [ARGS...]
  crashloop resume --state FILE [KEY]
  crashloop status --state FILE

flags:
`

// settings are the flags of the supervise command.
type settings struct {
	fs                 *flag.FlagSet
	maxRespawns        int
	window             time.Duration
	initialBackoff     time.Duration
	maxBackoff         time.Duration
	healthyAfter       time.Duration
	chainMax           int
	chainGap           time.Duration
	guard              string
	hourlyCap          int
	backoff            string
	jitter             string
	restart            string
	config             string
	key                string
	logFormat          string
	permanentExitCodes string
	state              string
	grace              time.Duration
}

func newSettings(stdout io.Writer) *settings {
	d := crashloop.DefaultSupervisorConfig()
	s := &settings{fs: flag.NewFlagSet("crashloop", flag.ContinueOnError)}
	fs := s.fs
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprint(stdout, usageText)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	fs.IntVar(&s.maxRespawns, "max-respawns", d.Budget.MaxRespawns, "respawns allowed in the rolling window before the command is parked")
	fs.DurationVar(&s.window, "window", d.Budget.Window, "rolling window of the respawn budget")
	fs.DurationVar(&s.initialBackoff, "initial-backoff", d.Budget.InitialBackoff, "first backoff (linear: N*initial)")
	fs.DurationVar(&s.maxBackoff, "max-backoff", d.Budget.MaxBackoff, "longest backoff")
	fs.DurationVar(&s.healthyAfter, "healthy-after", d.HealthyAfter, "a run this long was a healthy start; its failure is judged by the chain")
	fs.IntVar(&s.chainMax, "chain-max", d.Chain.MaxChain, "consecutive failures after healthy runs before giving up (0: off)")
	fs.DurationVar(&s.chainGap, "chain-gap", d.Chain.ResetGap, "a longer gap between such failures ends the chain")
	fs.StringVar(&s.guard, "guard", "off", `fast restart-loop guard: "off", "on" (3/60s) or "N/DURATION"`)
	fs.IntVar(&s.hourlyCap, "hourly-cap", 0, "park after this many restarts in a rolling hour (0: off)")
	fs.StringVar(&s.backoff, "backoff", "linear", `backoff curve: "linear" or "exponential" (doubling from --initial-backoff to --max-backoff)`)
	fs.StringVar(&s.jitter, "jitter", "none", `jitter: "none", "full", "equal" or "decorrelated"`)
	fs.StringVar(&s.restart, "restart", "on-failure", `"on-failure", or "always" to restart after exit status 0 too`)
	fs.StringVar(&s.config, "config", "", "JSON supervisor configuration; flags override it")
	fs.StringVar(&s.key, "key", "", "the command's stable identity in events and the state file (default: derived from the command line)")
	fs.StringVar(&s.logFormat, "log-format", "text", `event lines on stderr: "text" or "json"`)
	fs.StringVar(&s.permanentExitCodes, "permanent-exit-codes", "", "comma-separated exit statuses that park at once (like RestartPreventExitStatus)")
	fs.StringVar(&s.state, "state", "", "file that keeps parked marks across crashloop restarts and reboots")
	fs.DurationVar(&s.grace, "grace", 10*time.Second, "after forwarding SIGINT/SIGTERM, wait this long before SIGKILL")
	return s
}

// parseFlags parses flags, turning the flag package's errors into one line
// (the flag package would print the whole usage on every error).
func parseFlags(fs *flag.FlagSet, args []string) (bool, error) {
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return true, nil
		}
		return false, usagef("%v (see crashloop -h)", err)
	}
	return false, nil
}

// splitCommand separates crashloop's flags from the command after "--".
func splitCommand(args []string) (flags, cmd []string, err error) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:], nil
		}
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			return args, nil, nil
		}
	}
	return nil, nil, usagef("missing -- before the command (usage: crashloop [flags] -- CMD [ARGS...])")
}

// config builds the supervisor configuration: defaults, then --config, then
// the flags that were set.
func (s *settings) configuration() (crashloop.SupervisorConfig, error) {
	cfg := crashloop.DefaultSupervisorConfig()
	if s.config != "" {
		data, err := os.ReadFile(s.config)
		if err != nil {
			return cfg, usagef("--config: %v", err)
		}
		if err := cfg.UnmarshalJSON(data); err != nil {
			return cfg, usagef("--config %s: %v", s.config, err)
		}
	}
	var err error
	s.fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		switch f.Name {
		case "max-respawns":
			cfg.Budget.MaxRespawns = s.maxRespawns
		case "window":
			cfg.Budget.Window = s.window
		case "initial-backoff":
			cfg.Budget.InitialBackoff = s.initialBackoff
		case "max-backoff":
			cfg.Budget.MaxBackoff = s.maxBackoff
		case "healthy-after":
			cfg.HealthyAfter = s.healthyAfter
		case "chain-gap": // visited before chain-max, which may turn the chain off
			c := chainOf(cfg)
			c.ResetGap = s.chainGap
			cfg.Chain = &c
		case "chain-max":
			if s.chainMax == 0 {
				cfg.Chain = nil
				return
			}
			c := chainOf(cfg)
			c.MaxChain = s.chainMax
			cfg.Chain = &c
		case "guard":
			cfg.Guard, err = parseGuard(s.guard)
		case "hourly-cap":
			cfg.HourlyCap = s.hourlyCap
		case "restart":
			switch s.restart {
			case "on-failure":
				cfg.RestartOnCleanExit = false
			case "always":
				cfg.RestartOnCleanExit = true
			default:
				err = usagef("--restart=%q: want \"on-failure\" or \"always\"", s.restart)
			}
		}
	})
	if err != nil {
		return cfg, err
	}
	if isSet(s.fs, "backoff") || isSet(s.fs, "jitter") {
		if err := s.overrideCurve(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// chainOf returns the chain settings in force, or the defaults if it is off.
func chainOf(cfg crashloop.SupervisorConfig) crashloop.ChainConfig {
	if cfg.Chain != nil {
		return *cfg.Chain
	}
	return crashloop.DefaultChainConfig()
}

// overrideCurve applies --backoff and --jitter, whichever was set, to the
// curve in force (from --config or the default), keeping its other
// settings: --jitter alone does not turn an exponential curve linear. It
// goes through the configuration's JSON form, the one place that knows how
// a curve is written.
func (s *settings) overrideCurve(cfg *crashloop.SupervisorConfig) error {
	if _, err := s.curve(cfg.Budget); err != nil { // names a bad flag value
		return err
	}
	data, err := cfg.MarshalJSON()
	if err != nil {
		return err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	spec := map[string]any{}
	if raw := doc["backoff"]; raw != nil && string(raw) != "null" {
		if err := json.Unmarshal(raw, &spec); err != nil {
			return err
		}
	}
	if isSet(s.fs, "backoff") {
		spec["kind"] = s.backoff
		if s.backoff == "linear" {
			delete(spec, "factor")
		}
	}
	if isSet(s.fs, "jitter") {
		spec["jitter"] = s.jitter
	}
	if doc["backoff"], err = json.Marshal(spec); err != nil {
		return err
	}
	if data, err = json.Marshal(doc); err != nil {
		return err
	}
	next := crashloop.DefaultSupervisorConfig()
	if err := next.UnmarshalJSON(data); err != nil {
		return usagef("--backoff/--jitter: %v", err)
	}
	*cfg = next
	return nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// curve builds the backoff curve of --backoff and --jitter.
func (s *settings) curve(b crashloop.BudgetConfig) (crashloop.Backoff, error) {
	var c crashloop.Backoff
	switch s.backoff {
	case "linear":
		c = crashloop.Linear(b.InitialBackoff, b.MaxBackoff)
	case "exponential":
		c = crashloop.Exponential(b.InitialBackoff, 2, b.MaxBackoff)
	default:
		return nil, usagef("--backoff=%q: want \"linear\" or \"exponential\"", s.backoff)
	}
	switch s.jitter {
	case "none":
	case "full":
		c = crashloop.FullJitter(c, nil)
	case "equal":
		c = crashloop.EqualJitter(c, nil)
	case "decorrelated":
		c = crashloop.DecorrelatedJitter(b.InitialBackoff, b.MaxBackoff, nil)
	default:
		return nil, usagef("--jitter=%q: want \"none\", \"full\", \"equal\" or \"decorrelated\"", s.jitter)
	}
	return c, nil
}

// parseGuard reads --guard: "off", "on" or "N/DURATION".
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
		return nil, usagef("--guard=%q: want \"off\", \"on\" or N/DURATION such as 3/60s", v)
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
			return nil, usagef("--permanent-exit-codes: %q is not an exit status from 1 to 255", f)
		}
		codes[c] = true
	}
	return codes, nil
}

// defaultKey derives a stable key from the command line: the program's base
// name and a short hash of the whole argv, e.g. "sh-3f2a9c1e".
func defaultKey(cmd []string) string {
	h := sha256.Sum256([]byte(strings.Join(cmd, "\x00")))
	return filepath.Base(cmd[0]) + "-" + hex.EncodeToString(h[:4])
}

func (s *settings) logger(stderr io.Writer) (*slog.Logger, error) {
	switch s.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(stderr, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(stderr, nil)), nil
	}
	return nil, usagef("--log-format=%q: want \"text\" or \"json\"", s.logFormat)
}

func superviseCmd(args []string, stdout, stderr io.Writer) (int, error) {
	flagArgs, cmd, err := splitCommand(args)
	if err != nil {
		return 0, err
	}
	s := newSettings(stdout)
	if help, err := parseFlags(s.fs, flagArgs); help || err != nil {
		return 0, err
	}
	if s.fs.NArg() > 0 {
		return 0, usagef("unexpected argument %q before -- (usage: crashloop [flags] -- CMD [ARGS...])", s.fs.Arg(0))
	}
	if len(cmd) == 0 || cmd[0] == "" {
		return 0, usagef("no command after -- (usage: crashloop [flags] -- CMD [ARGS...])")
	}
	cfg, err := s.configuration()
	if err != nil {
		return 0, err
	}
	permanent, err := parseExitCodes(s.permanentExitCodes)
	if err != nil {
		return 0, err
	}
	log, err := s.logger(stderr)
	if err != nil {
		return 0, err
	}
	if s.grace < 0 {
		return 0, usagef("--grace=%v: must be >= 0", s.grace)
	}
	key := s.key
	if key == "" {
		key = defaultKey(cmd)
	}
	sup, err := crashloop.NewSupervisor(cfg, crashloop.WithEventHandler(crashloop.LogEvents(log)))
	if err != nil {
		return 0, usagef("%v", err)
	}
	var state *stateStore
	if s.state != "" {
		state = newStateStore(s.state)
		st, err := state.read()
		if err != nil {
			return exitError, err
		}
		if m, ok := st.Marks[key]; ok {
			fmt.Fprintf(stderr, "crashloop: %s is parked since %s (%s): %s\ncrashloop: fix the cause, then run: crashloop resume --state %s %s\n",
				key, m.Since.Format(time.RFC3339), m.Reason, m.LastError, s.state, key)
			return exitParked, nil
		}
	}

	c := &child{argv: cmd, permanent: permanent, grace: s.grace}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case sig := <-sigs:
				c.signal(sig.(syscall.Signal))
				stop()
			case <-done:
				return
			}
		}
	}()

	err = sup.Run(ctx, key, c.run)
	var pe *crashloop.ParkedError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &pe):
		fmt.Fprintf(stderr, "crashloop: giving up on %s: %s after %d starts; last exit: %s\n", key, pe.Reason, c.starts, c.lastExit())
		if state != nil {
			m := mark{Reason: pe.Reason, Starts: c.starts, Since: pe.Since, Command: cmd}
			if pe.LastError != nil {
				m.LastError = pe.LastError.Error()
			}
			if st, ok := c.status(); ok {
				m.ExitStatus = &st
			}
			if err := state.update(func(sf *stateFile) (bool, error) {
				sf.Marks[key] = m
				return true, nil
			}); err != nil {
				return exitParked, err
			}
			fmt.Fprintf(stderr, "crashloop: parked in %s; after fixing the cause run: crashloop resume --state %s %s\n", s.state, s.state, key)
		}
		return exitParked, nil
	case ctx.Err() != nil:
		if st, ok := c.status(); ok && c.signaled() {
			return st, nil
		}
		return 128 + int(c.sig()), nil
	}
	return exitError, err
}

// child runs the supervised command, one incarnation at a time.
type child struct {
	argv      []string
	permanent map[int]bool
	grace     time.Duration

	mu       sync.Mutex
	proc     *os.Process
	stopSig  syscall.Signal // the signal crashloop received, 0 if none
	starts   int
	last     int  // last exit status, -1 if it could not start
	lastSet  bool // last is meaningful
	lastDesc string
	gotSig   bool // the last run ended after a forwarded signal
}

// run starts the command and waits for it; it is the Supervisor's fn.
func (c *child) run(ctx context.Context) error {
	c.mu.Lock()
	c.starts++
	if c.stopSig != 0 {
		c.mu.Unlock()
		return ctx.Err()
	}
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		c.last, c.lastSet, c.lastDesc = -1, false, "could not start: "+err.Error()
		c.mu.Unlock()
		return fmt.Errorf("start %s: %w", c.argv[0], err)
	}
	c.proc = cmd.Process
	c.mu.Unlock()

	err := cmd.Wait()

	c.mu.Lock()
	defer c.mu.Unlock()
	c.proc = nil
	c.gotSig = c.stopSig != 0
	code, desc := exitStatus(cmd.ProcessState, err)
	c.last, c.lastSet, c.lastDesc = code, true, desc
	switch {
	case code == 0:
		return nil
	case c.permanent[code]:
		return crashloop.Permanent(fmt.Errorf("%s %s", c.argv[0], desc))
	}
	return fmt.Errorf("%s %s", c.argv[0], desc)
}

// exitStatus turns a finished process into a shell-style status (128+N for
// signal N) and a description.
func exitStatus(ps *os.ProcessState, err error) (int, string) {
	if ps == nil {
		return -1, "failed: " + err.Error()
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), "killed by signal " + ws.Signal().String()
	}
	code := ps.ExitCode()
	return code, "exited with status " + strconv.Itoa(code)
}

// signal forwards sig to the running command, and kills it if it has not
// exited after the grace period.
func (c *child) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopSig == 0 {
		c.stopSig = sig
	}
	p := c.proc
	if p == nil {
		return
	}
	_ = p.Signal(sig)
	time.AfterFunc(c.grace, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.proc == p {
			_ = p.Kill()
		}
	})
}

func (c *child) status() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.lastSet
}

func (c *child) signaled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gotSig
}

func (c *child) sig() syscall.Signal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopSig
}

func (c *child) lastExit() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastDesc
}

func stateFlags(name string, args []string, stdout io.Writer) (*flag.FlagSet, *string, bool, error) {
	fs := flag.NewFlagSet("crashloop "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("state", "", "the state file")
	fs.Usage = func() {
		fmt.Fprint(stdout, usageText)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	help, err := parseFlags(fs, args)
	if help || err != nil {
		return fs, path, help, err
	}
	if *path == "" {
		return fs, path, false, usagef("%s needs --state FILE", name)
	}
	return fs, path, false, nil
}

func resumeCmd(args []string, stdout io.Writer) (int, error) {
	fs, path, help, err := stateFlags("resume", args, stdout)
	if help || err != nil {
		return 0, err
	}
	if fs.NArg() > 1 {
		return 0, usagef("resume takes at most one KEY, got %d", fs.NArg())
	}
	var resumed string
	err = newStateStore(*path).update(func(st *stateFile) (bool, error) {
		key := fs.Arg(0)
		if key == "" {
			keys := st.keys()
			switch len(keys) {
			case 0:
				return false, fmt.Errorf("nothing is parked in %s", *path)
			case 1:
				key = keys[0]
			default:
				return false, fmt.Errorf("several keys are parked in %s, name one: %s", *path, strings.Join(keys, ", "))
			}
		}
		if _, ok := st.Marks[key]; !ok {
			return false, fmt.Errorf("%s is not parked in %s", key, *path)
		}
		delete(st.Marks, key)
		resumed = key
		return true, nil
	})
	if err != nil {
		return exitError, err
	}
	fmt.Fprintf(stdout, "crashloop: resumed %s; it starts with a full budget next time\n", resumed)
	return 0, nil
}

func statusCmd(args []string, stdout io.Writer) (int, error) {
	fs, path, help, err := stateFlags("status", args, stdout)
	if help || err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, usagef("status takes no arguments, got %q", fs.Arg(0))
	}
	st, err := newStateStore(*path).read()
	if err != nil {
		return exitError, err
	}
	return 0, st.writeJSON(stdout)
}
