//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/crashloopguard/crashloop/promcrashloop"
	"github.com/crashloopguard/crashloop/redisstore"
	"github.com/crashloopguard/crashloop/share"
)

// superviseCmd is "crashloop [flags] -- PROGRAM [ARGS...]". It returns
// crashloop's exit status, or an error to print as one line (a *failure
// carries its own status).
func superviseCmd(args []string, stdout io.Writer, out *output) (int, error) {
	s, argv, done, err := parseSupervise(args, stdout, out)
	if done || err != nil {
		return 0, err
	}
	log := newLogger(s.logFormat, out.stderr)
	if s.state == "" && s.redis.url == "" {
		log = slog.New(parkNote{log.Handler(), forgottenPark(s.adminToken != "")})
	}
	cfg, err := s.configuration()
	if err != nil {
		return 0, err
	}
	s.fleetOf(&cfg)
	var events promcrashloop.Events
	var metrics net.Listener
	ep := &endpoints{log: log}
	if s.adminToken != "" {
		if ep.token, err = readToken(s.adminToken); err != nil {
			return 0, err
		}
	}
	if s.metricsAddr != "" {
		if metrics, err = listenMetrics(s.metricsAddr); err != nil {
			return 0, err
		}
		defer metrics.Close()
	}
	var store *redisstore.Store
	if s.redis.url != "" {
		if store, err = s.redis.open(); err != nil {
			return 0, err
		}
		defer store.Close()
		s.redis.check(store, out)
	}
	reaper := newReaper() // before the hooks, which it reaps too
	defer reaper.close()
	h := &hooks{park: s.onParkExec, trip: s.onTripExec, timeout: s.hookTimeout, log: log, reaper: reaper}
	defer h.wait() // the hook of the park that ends crashloop runs to its end
	key := s.key
	if key == "" {
		key = defaultKey(argv)
	}
	watch := &probeWatch{key: key}
	sup, layer, err := newSupervisor(s, cfg, log, &events, store, h, watch)
	if err != nil {
		return 0, err
	}
	s.warnSharedCause(cfg, log, key)

	// --redis: no start of a key the replicas parked, but for its probe
	// once it is due (--probe-after: Run claims it, or refuses the key).
	// Under --on-park wait, Run refuses it and crashloop waits.
	wait := s.onPark == "wait"
	parkedBefore := false // the key was parked when crashloop started: its first run can only be a probe
	if store != nil && !wait {
		if pe := parkedInRedis(store, key, s.redis.timeout); pe != nil {
			if cfg.ProbeAfter <= 0 {
				return refuse(out, key, markOf(parkOf(pe), 0, nil, nil), resumeRedisCommand(s.redis, key))
			}
			parkedBefore = true
		}
	}

	// --state: one crashloop per key (unless the replicas share it on
	// Redis: several of one key is the point there), a file from the start
	// (for status), and no start of a parked key. Under --on-park wait, the
	// Supervisor learns the park, Run refuses it and crashloop waits; with
	// --redis, Redis decides.
	var state *stateStore
	if s.state != "" {
		state = newStateStore(s.state)
		if err := state.checkFolder(); err != nil {
			return 0, err
		}
		if store == nil {
			release, err := state.lockKey(key)
			if err != nil {
				return 0, err
			}
			defer release()
		}
		if err := state.create(); err != nil {
			return 0, err
		}
		st, err := state.load(true)
		if err != nil {
			return 0, err
		}
		if m, ok := st.Marks[key]; ok {
			switch {
			case !wait && store != nil && parkedBefore: // Redis decides the probe
			case !wait && (store != nil || cfg.ProbeAfter <= 0):
				return refuse(out, key, m, resumeCommand(s.state, key))
			case store == nil:
				// The Supervisor learns the park and its probe schedule
				// (the mark's, or ProbeAfter after the park); under
				// --on-park exit crashloop goes on only for a probe that
				// is due.
				if err := restorePark(sup, key, m); err != nil {
					return 0, fmt.Errorf("state file %s: the park of %s: %w", s.state, key, err)
				}
				parkedBefore = true
				if next := probeOf(sup, key).next; !wait && (next.IsZero() || time.Now().Before(next)) {
					return refuse(out, key, m.withProbe(probeState{next: next, probes: m.Probes}), resumeCommand(s.state, key))
				}
			}
		}
	}

	// The program's runs. Signals are routed first: until then HUP, QUIT
	// and the others would end crashloop.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &runner{key: key, argv: argv, dir: s.chdir, grace: s.grace, watchdog: s.watchdog, healthy: cfg.HealthyAfter, log: log, cancel: cancel}
	if r.oom, err = newOOMCounter(); err != nil && hasOOMRule(cfg.ExitRules) {
		log.Warn("crashloop cannot tell OOM kills ("+err.Error()+"): an --on-exit oom rule never matches; it needs the memory controller on crashloop's cgroup (v2, or a v1 memory hierarchy)", "key", key)
	}
	sigs := readSigState() // before crashloop changes it
	defer handleSignals(r)()
	if err := becomeSubreaper(); err != nil {
		log.Warn("crashloop cannot be the subreaper of the program's processes: "+err.Error(), "key", key)
	}
	notifyDir, notifySocket := "", ""
	if r.notify, err = newNotifier(r.notified, log); err != nil {
		if s.watchdog > 0 {
			return 0, fmt.Errorf("--watchdog needs the notify socket: %w", err)
		}
		log.Warn(err.Error()+"; the program gets no NOTIFY_SOCKET, and crashloop cannot hear READY=1 or STATUS=", "key", key)
	} else {
		notifyDir, notifySocket = r.notify.dir, r.notify.path
	}
	defer r.notify.close()
	self, err := selfPath()
	if err != nil {
		return 0, err
	}
	keeper, err := startKeeper(reaper, self, notifyDir, log)
	if err != nil {
		return 0, err
	}
	defer keeper.close()
	r.launch = &launcher{reaper: reaper, keeper: keeper, self: self, log: log, key: key, sigs: sigs, term: foregroundTerminal(),
		tailLines: s.tailLines, tailBytes: s.tailBytes}
	r.env = s.programEnv(notifySocket)
	if s.health.cmd != "" {
		hc := s.health
		hc.reaper = reaper
		hc.env, hc.dir = withoutEnv(withoutEnv(withoutEnv(r.env, "NOTIFY_SOCKET"), "WATCHDOG_USEC"), "WATCHDOG_PID"), s.chdir
		r.health = &hc
	}
	ep.r = r
	if wait {
		ep.waiter = &parkWaiter{key: key, sup: sup, layer: layer, state: state, store: store, redis: s.redis, log: log}
	}
	var resumes atomic.Int64 // resumes of a parked key while its probe ran: by the probe, or over HTTP
	if wait {
		ep.waiter.resumes = &resumes
	}
	watch.onResume(func() { // a healthy probe resumed the key: it runs on with a full budget
		resumes.Add(1)
		r.resumed()
		if ep.waiter != nil {
			ep.waiter.probeResumed()
		}
		if state != nil {
			unmark(state, key, log)
		}
	})
	if metrics != nil {
		defer serveMetrics(metrics, sup, &events, r, log, ep).close()
		if !wait {
			log.Info("--on-park exit: a park ends crashloop and its metrics server, so no scrape will see it (--on-park wait keeps serving)", "key", key)
		}
	}

	// parkedBefore: the key was parked before the Run, which can then only
	// run it as a probe (the Supervisor claims the probe when it is due,
	// and refuses the key otherwise): a park that ends such a run is the
	// same park, the probe failed, unless the key was resumed meanwhile
	// (by the probe, or over HTTP).
	probing := false // the Run is for a probe that came due while crashloop waited
	if wait && parkedBefore {
		ep.waiter.probe() // its probe may be due: a resume over HTTP reaches it
	}
	for {
		ran := false // Run refuses a parked key without a run
		before := resumes.Load()
		err = sup.Run(ctx, key, func(ctx context.Context) error { ran = true; return r.run(ctx) })
		failedProbe := parkedBefore && ran && resumes.Load() == before
		var pe *crashloop.ParkedError
		switch {
		case r.failed != nil: // Run returns only after the run that set it
			return 0, r.failed
		case errors.As(err, &pe) && wait:
			flushed := true
			ps := probeOf(sup, key)
			switch {
			case !ran && probing: // not claimed here: another replica runs the probe
				out.print(slog.LevelInfo, fmt.Sprintf("%s's probe did not start here (another replica runs it)%s", key, dueAt(ps.next)), "key", key)
			case !ran: // parked before crashloop started
				p := parkOf(pe)
				p.setProbe(ps.next)
				r.parked(&p)
				announceRefusal(out, key, markOf(p, 0, nil, nil))
			case failedProbe:
				if err := probeFailed(r, state, ps, out); err != nil {
					log.Error("the next probe was not recorded: "+err.Error(), "key", key)
				}
			default:
				if store != nil {
					flushed = flush(layer, out, key)
				}
				if code, err := gaveUp(r, pe, state, nil, out, argv, ps); err != nil {
					return code, err
				}
			}
			if !probing || ran && !failedProbe {
				out.print(slog.LevelInfo, waitLine(ps.next)+resumeHint(s, key, ep.token != nil), "key", key)
			}
			parkedBefore = true
			by, ok := ep.waiter.wait(ctx, flushed, ps.next)
			if !ok {
				out.print(slog.LevelInfo, fmt.Sprintf("stopped while %s was parked; it stays parked", key), "key", key)
				return 0, nil
			}
			if probing = by == byProbe; probing {
				ep.waiter.probe()
				out.print(slog.LevelInfo, fmt.Sprintf("%s's probe is due: starting it once; a healthy run resumes it", key), "key", key)
				continue
			}
			parkedBefore = false
			r.resumed()
			out.print(slog.LevelInfo, fmt.Sprintf("%s was resumed (%s): starting it with a full budget", key, by), "key", key, "by", by)
		case errors.As(err, &pe):
			ps := probeOf(sup, key)
			switch {
			case parkedBefore && !ran: // its probe is not due, or another replica runs it
				resume := resumeCommand(s.state, key)
				if store != nil {
					resume = resumeRedisCommand(s.redis, key)
				}
				return refuse(out, key, markOf(parkOf(pe), 0, nil, nil).withProbe(ps), resume)
			case failedProbe:
				if err := probeFailed(r, state, ps, out); err != nil {
					return exitError, fail(exitError, "the probe of %s failed, and its next probe was not recorded: %v", key, err)
				}
				return exitParked, nil
			}
			var shared *redisConfig
			if store != nil && flush(layer, out, key) { // a park decided alone reaches the other replicas
				shared = &s.redis
			}
			return gaveUp(r, pe, state, shared, out, argv, ps)
		case ctx.Err() != nil:
			return r.stoppedStatus(), nil
		case errors.As(err, new(*runFailure)): // an --on-exit stop rule matched
			r.mu.Lock()
			status, last := r.status, r.last
			r.mu.Unlock()
			out.print(slog.LevelInfo, fmt.Sprintf("%s %s: an --on-exit stop rule ends supervision with its status %d", argv[0], last, status), "key", key, "exit_code", status)
			return status, nil
		case err != nil:
			return exitError, err
		default:
			return 0, nil
		}
	}
}

// announceRefusal says that key is parked (m), for refuse, and when
// crashloop waits for a resume instead of exiting.
func announceRefusal(out *output, key string, m mark) {
	p := m.park(key)
	var next time.Time
	if m.NextProbe != nil {
		next = *m.NextProbe
	}
	out.print(slog.LevelError, fmt.Sprintf("%s is parked since %s (%s): %s%s%s", key, m.Since.Format(time.RFC3339), m.Reason, m.LastError, lastWords(p.StderrTail), dueAt(next)),
		p.attrs()...)
}

// dueAt says when the next probe is due, after a sentence: "" if none is.
func dueAt(next time.Time) string {
	if next.IsZero() {
		return ""
	}
	return "; its next probe is due at " + next.UTC().Format(time.RFC3339Nano)
}

// waitLine is the start of the line that says crashloop waits on a park
// whose next probe is due at next (zero: none).
func waitLine(next time.Time) string {
	if next.IsZero() {
		return "--on-park wait: the program stays stopped until it is resumed; then it starts with a full budget: "
	}
	return "--on-park wait: the program stays stopped until it is resumed, or until its probe at " + next.UTC().Format(time.RFC3339Nano) +
		" (a healthy probe resumes it); resumed, it starts with a full budget: "
}

// resumeHint says how to resume key: the command for --redis or --state,
// and POST /resume with --admin-token-file.
func resumeHint(s *settings, key string, http bool) string {
	var ways []string
	switch {
	case s.redis.url != "":
		ways = append(ways, "run "+resumeRedisCommand(s.redis, key))
	case s.state != "":
		ways = append(ways, "run "+resumeCommand(s.state, key))
	}
	if http {
		ways = append(ways, "POST /resume on --metrics-addr with the admin token")
	}
	return strings.Join(ways, ", or ")
}

// fleetOf turns the fleet breaker off unless the replicas share it: one
// crashloop supervises one key, and one key is not a fleet (its restarts
// would trip the breaker, 40 in an hour with --restart=always or
// --chain-max 0, and hold it for the cooldown). With --redis the deployment
// is the fleet. A "fleet" that --config sets is kept: it was asked for.
func (s *settings) fleetOf(cfg *crashloop.SupervisorConfig) {
	if s.redis.url == "" && !s.inFile("fleet") {
		cfg.Fleet = nil
	}
}

// refuse says that key is parked (m) and how to resume it, without
// starting the program.
func refuse(out *output, key string, m mark, resume string) (int, error) {
	announceRefusal(out, key, m)
	out.print(slog.LevelInfo, "once the cause is fixed, run: "+resume, "key", key)
	return exitParked, nil
}

// newSupervisor builds the Supervisor from the configuration. Every
// subsystem that watches or shares the Supervisor's state adds its
// crashloop.Option here: an event handler to the list, or a store. events
// counts the events for --metrics-addr; hooks runs --on-park-exec and
// --on-trip-exec; watch sees a probe resume the key; store, with --redis,
// is the ledger the replicas share.
func newSupervisor(s *settings, cfg crashloop.SupervisorConfig, log *slog.Logger, events *promcrashloop.Events, store *redisstore.Store, hooks *hooks, watch *probeWatch) (*crashloop.Supervisor, *share.Layer, error) {
	handlers := []crashloop.EventHandler{crashloop.LogEvents(log), hooks, watch}
	if s.metricsAddr != "" {
		handlers = append(handlers, events)
	}
	opts := []crashloop.Option{crashloop.WithEventHandler(crashloop.MultiHandler(handlers...))}
	var layer *share.Layer // nil: this process alone
	if store != nil {
		layer = share.New(store)
		opts = append(opts, crashloop.WithSharing(layer))
	}
	sup, err := crashloop.NewSupervisor(cfg, opts...)
	if err != nil {
		return nil, nil, s.explain(err)
	}
	return sup, layer, nil
}

// gaveUp reports a park, with ps, its probe schedule, records it in the
// state file if there is one, and returns exit status 86; or 1, saying so, when the park could be recorded
// nowhere (neither in the state file nor on Redis): the next crashloop
// would run the program.
func gaveUp(r *runner, pe *crashloop.ParkedError, state *stateStore, shared *redisConfig, out *output, argv []string, ps probeState) (int, error) {
	r.mu.Lock()
	starts, last, status, exit, ended := r.starts, r.last, r.status, r.exit, r.ended
	r.mu.Unlock()
	if !ended && pe.LastError != nil {
		last = pe.LastError.Error()
	}
	park := parkOf(pe) // how the program ended, when another replica's run made the park
	if _, ok := errtext.ExitOf(pe.LastError); !ok && ended {
		park.setExit(exit)
	}
	park.setProbe(ps.next)
	r.parked(&park)
	out.print(slog.LevelError, fmt.Sprintf("giving up on %s: %s after %s; last exit: %s%s", r.key, pe.Reason, errtext.Plural(starts, "start"), last, lastWords(park.StderrTail)),
		park.attrs("starts", starts, "last_exit", last)...)
	if shared != nil {
		out.print(slog.LevelInfo, fmt.Sprintf("parked on Redis for every replica; once the cause is fixed, run: %s", resumeRedisCommand(*shared, r.key)), "key", r.key)
	}
	if state == nil {
		return exitParked, nil
	}
	var laststatus *int
	if ended {
		laststatus = &status
	}
	m := markOf(park, starts, laststatus, argv).withProbe(ps)
	err := state.update(func(st *stateFile) (bool, error) {
		st.Marks[r.key] = m
		return true, nil
	})
	switch {
	case err != nil && shared != nil: // Redis holds it: it stands for every crashloop of the key
		out.print(slog.LevelError, fmt.Sprintf("the park of %s was not recorded in %s (%v); Redis holds it", r.key, state.path, err), "key", r.key)
		return exitParked, nil
	case err != nil:
		return exitError, fail(exitError, "the park of %s was not recorded: %v; a crashloop started with --state %s will run the program again", r.key, err, state.path)
	}
	out.print(slog.LevelInfo, fmt.Sprintf("parked in %s; once the cause is fixed, run: %s", state.path, resumeCommand(state.path, r.key)), "key", r.key)
	return exitParked, nil
}

// plainWord is a word a shell reads as it is.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+-]+$`)

// resumeCommand returns the command line that resumes key, quoted for a
// shell.
func resumeCommand(state, key string) string {
	return "crashloop resume --state " + shellQuote(state) + " " + shellQuote(key)
}

// resumeRedisCommand returns the command line that resumes key for every
// replica, quoted for a shell, without the URL's password.
func resumeRedisCommand(c redisConfig, key string) string {
	cmd := "crashloop resume --redis " + shellQuote(withoutPassword(c.url))
	if c.prefix != "crashloop" {
		cmd += " --redis-prefix " + shellQuote(c.prefix)
	}
	for _, f := range [][2]string{{"--redis-ca", c.ca}, {"--redis-cert", c.cert}, {"--redis-key", c.key}} {
		if f[1] != "" {
			cmd += " " + f[0] + " " + shellQuote(f[1])
		}
	}
	return cmd + " " + shellQuote(key)
}

// shellQuote quotes w for a shell, unless it needs none.
func shellQuote(w string) string {
	if plainWord.MatchString(w) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
