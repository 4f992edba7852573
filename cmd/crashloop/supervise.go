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
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/crashloopguard/crashloop/promcrashloop"
	"github.com/crashloopguard/crashloop/redisstore"
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
	cfg, err := s.configuration()
	if err != nil {
		return 0, err
	}
	s.fleetOf(&cfg)
	var events promcrashloop.Events
	var metrics net.Listener
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
	}
	sup, err := newSupervisor(s, cfg, log, &events, store)
	if err != nil {
		return 0, err
	}
	key := s.key
	if key == "" {
		key = defaultKey(argv)
	}

	// --redis: no start of a key the replicas parked.
	if store != nil {
		if pe := parkedInRedis(store, key, s.redis.timeout); pe != nil {
			last := ""
			if pe.LastError != nil {
				last = pe.LastError.Error()
			}
			return refuse(out, key, mark{Reason: pe.Reason, Since: pe.Since, LastError: last}, resumeRedisCommand(s.redis, key))
		}
	}

	// --state: one crashloop per key (unless the replicas share it on
	// Redis: several of one key is the point there), and no start of a
	// parked key.
	var state *stateStore
	if s.state != "" {
		state = newStateStore(s.state)
		if store == nil {
			release, err := state.lockKey(key)
			if err != nil {
				return 0, err
			}
			defer release()
		}
		st, err := state.load(true)
		if err != nil {
			return 0, err
		}
		if m, ok := st.Marks[key]; ok {
			return refuse(out, key, m, resumeCommand(s.state, key))
		}
	}

	// The program's runs. Signals are routed first: until then HUP, QUIT
	// and the others would end crashloop.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	permanent, _ := parseExitCodes(s.permanentExitCodes) // checked by settings.check
	r := &runner{key: key, argv: argv, dir: s.chdir, grace: s.grace, watchdog: s.watchdog, permanent: permanent, log: log, cancel: cancel}
	defer handleSignals(r)()
	reaper := newReaper()
	defer reaper.close()
	if err := becomeSubreaper(); err != nil {
		log.Warn("crashloop cannot be the subreaper of the program's processes: "+err.Error(), "key", key)
	}
	if r.notify, err = newNotifier(r.notified); err != nil {
		return 0, err
	}
	defer r.notify.close()
	self, err := selfPath()
	if err != nil {
		return 0, err
	}
	keeper, err := startKeeper(reaper, self, r.notify.dir, log)
	if err != nil {
		return 0, err
	}
	defer keeper.close()
	r.launch = &launcher{reaper: reaper, keeper: keeper, self: self}
	r.env = s.programEnv(r.notify.path)
	if metrics != nil {
		defer serveMetrics(metrics, sup, &events, r, log).close()
	}

	err = sup.Run(ctx, key, r.run)
	var pe *crashloop.ParkedError
	switch {
	case r.failed != nil: // Run returns only after the run that set it
		return 0, r.failed
	case errors.As(err, &pe):
		var shared *redisConfig
		if store != nil && flush(sup, out, key) { // a park decided alone reaches the other replicas
			shared = &s.redis
		}
		return gaveUp(r, pe, state, shared, out, argv)
	case ctx.Err() != nil:
		return r.stoppedStatus(), nil
	case err != nil:
		return exitError, err
	}
	return 0, nil
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
	out.print(slog.LevelError, fmt.Sprintf("%s is parked since %s (%s): %s", key, m.Since.Format(time.RFC3339), m.Reason, m.LastError),
		"key", key, "reason", m.Reason, "since", m.Since, "last_error", m.LastError)
	out.print(slog.LevelInfo, "once the cause is fixed, run: "+resume, "key", key)
	return exitParked, nil
}

// newSupervisor builds the Supervisor from the configuration. Every
// subsystem that watches or shares the Supervisor's state adds its
// crashloop.Option here: an event handler to the list, or a store. events
// counts the events for --metrics-addr; store, with --redis, is the ledger
// the replicas share.
func newSupervisor(s *settings, cfg crashloop.SupervisorConfig, log *slog.Logger, events *promcrashloop.Events, store *redisstore.Store) (*crashloop.Supervisor, error) {
	handlers := []crashloop.EventHandler{crashloop.LogEvents(log)}
	if s.metricsAddr != "" {
		handlers = append(handlers, events)
	}
	opts := []crashloop.Option{crashloop.WithEventHandler(crashloop.MultiHandler(handlers...))}
	var ledger crashloop.Ledger // nil: this process alone
	if store != nil {
		ledger = store
	}
	sup, err := crashloop.NewSharedSupervisor(cfg, ledger, opts...)
	if err != nil {
		return nil, s.explain(err)
	}
	return sup, nil
}

// gaveUp reports a park, records it in the state file if there is one, and
// returns exit status 86.
func gaveUp(r *runner, pe *crashloop.ParkedError, state *stateStore, shared *redisConfig, out *output, argv []string) (int, error) {
	r.mu.Lock()
	starts, last, status, ended := r.starts, r.last, r.status, r.ended
	r.mu.Unlock()
	if !ended && pe.LastError != nil {
		last = pe.LastError.Error()
	}
	out.print(slog.LevelError, fmt.Sprintf("giving up on %s: %s after %s; last exit: %s", r.key, pe.Reason, errtext.Plural(starts, "start"), last),
		"key", r.key, "reason", pe.Reason, "starts", starts, "last_exit", last)
	if shared != nil {
		out.print(slog.LevelInfo, fmt.Sprintf("parked on Redis for every replica; once the cause is fixed, run: %s", resumeRedisCommand(*shared, r.key)), "key", r.key)
	}
	if state == nil {
		return exitParked, nil
	}
	m := mark{Reason: pe.Reason, Starts: starts, Since: pe.Since, Command: argv}
	if pe.LastError != nil {
		m.LastError = pe.LastError.Error()
	}
	if ended {
		m.ExitStatus = &status
	}
	err := state.update(func(st *stateFile) (bool, error) {
		st.Marks[r.key] = m
		return true, nil
	})
	if err != nil {
		return exitParked, err
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
	return cmd + " " + shellQuote(key)
}

// shellQuote quotes w for a shell, unless it needs none.
func shellQuote(w string) string {
	if plainWord.MatchString(w) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
