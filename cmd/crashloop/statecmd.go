//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/crashloopguard/crashloop/redisstore"
)

const statusHelp = `Usage: crashloop status --state FILE [--json]
       crashloop status --redis URL [--redis-prefix NAME] [--json]

Prints what is parked in the state file, or in the state the replicas share
on Redis: each key's reason, since when, its starts (respawns, rescues or
restarts on Redis) and its last error (--json: a JSON document); on Redis,
the fleet breaker too. It only reads: it creates no file and works in a
read-only folder. A missing file is an error. The Redis password comes from
the URL or from $REDIS_PASSWORD.
`

const resumeHelp = `Usage: crashloop resume --state FILE [KEY]
       crashloop resume --redis URL [--redis-prefix NAME] [KEY]

Clears the park of KEY (which may be left out when only one key is parked),
so that the next crashloop with that key starts the program with a full
budget; on Redis, for every replica at once.
`

// where is what status and resume read: a state file, or the state shared
// on Redis.
type where struct {
	state string
	redis redisConfig
}

// parseStateFlags parses the flags of status and resume. done is true when
// it has printed help.
func parseStateFlags(fs *flag.FlagSet, help string, args []string, stdout io.Writer) (w where, done bool, err error) {
	fs.SetOutput(io.Discard)
	fs.StringVar(&w.state, "state", "", "the state file")
	fs.StringVar(&w.redis.url, "redis", "", "the Redis server of the shared state")
	fs.StringVar(&w.redis.prefix, "redis-prefix", "crashloop", "the deployment's prefix on Redis")
	fs.DurationVar(&w.redis.timeout, "redis-timeout", redisstore.DefaultTimeout, "the longest one call waits for Redis")
	w.redis.tlsFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, help)
			return w, true, nil
		}
		return w, false, flagError(fs, args, err)
	}
	switch {
	case w.state == "" && w.redis.url == "":
		return w, false, usagef("%s needs --state FILE or --redis URL", fs.Name())
	case w.state != "" && w.redis.url != "":
		return w, false, usagef("%s takes --state FILE or --redis URL, not both", fs.Name())
	case w.redis.timeout <= 0:
		return w, false, usagef("--redis-timeout: must be > 0")
	}
	return w, false, nil
}

// statusCmd is "crashloop status".
func statusCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print a JSON document")
	w, done, err := parseStateFlags(fs, statusHelp, args, stdout)
	if done || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("status takes no arguments, got %q", fs.Arg(0))
	}
	if w.redis.url != "" {
		return statusRedis(w.redis, *asJSON, stdout)
	}
	st, err := newStateStore(w.state).load(false)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, st)
	}
	if len(st.Marks) == 0 {
		fmt.Fprintf(stdout, "nothing is parked in %s\n", w.state)
		return nil
	}
	rows := make(map[string]row, len(st.Marks))
	for key, m := range st.Marks {
		rows[key] = row{m.Reason, m.Since, m.Starts, m.LastError, m.Exit}
	}
	return printRows(stdout, "STARTS", rows)
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// row is a park as status prints it.
type row struct {
	reason string
	since  time.Time
	count  int
	last   string
	exit   errtext.Exit
}

// printRows prints parks as a table sorted by key, counted naming the
// count's column and EXIT the last exit status or signal ("-" if unknown),
// then the stderr tail of each park that has one, indented.
func printRows(w io.Writer, counted string, rows map[string]row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "KEY\tREASON\tSINCE\t%s\tEXIT\tLAST ERROR\n", counted)
	keys := slices.Sorted(maps.Keys(rows))
	for _, key := range keys {
		r := rows[key]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", key, r.reason, r.since.Format(time.RFC3339), r.count, exitColumn(r.exit), r.last)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, key := range keys {
		if tail := rows[key].exit.StderrTail; tail != "" {
			fmt.Fprintf(w, "\n%s, the last lines on stderr:\n", key)
			for _, line := range strings.Split(strings.TrimSuffix(tail, "\n"), "\n") {
				fmt.Fprintf(w, "  | %s\n", line)
			}
		}
	}
	return nil
}

// exitColumn is how a program ended in status's table: its exit status,
// the signal that killed it, such as "SIGKILL", or "-" if unknown.
func exitColumn(x errtext.Exit) string {
	switch {
	case x.Signal != "":
		return "SIG" + x.Signal
	case x.ExitCode != nil:
		return strconv.Itoa(*x.ExitCode)
	}
	return "-"
}

// resumeCmd is "crashloop resume".
func resumeCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	w, done, err := parseStateFlags(fs, resumeHelp, args, stdout)
	if done || err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usagef("resume takes at most one KEY, got %d", fs.NArg())
	}
	if w.redis.url != "" {
		return resumeRedis(w.redis, fs.Arg(0), stdout)
	}
	path := w.state
	store := newStateStore(path)
	if _, err := store.load(false); err != nil { // a missing file is an error, and no lock file is made for it
		return err
	}
	key := fs.Arg(0)
	err = store.update(func(st *stateFile) (bool, error) {
		keys := st.keys()
		switch {
		case key == "":
			var err error
			if key, err = resumeKey(keys, path); err != nil {
				return false, err
			}
		case len(keys) == 0:
			return false, fmt.Errorf("%s is not parked: nothing is parked in %s", key, path)
		}
		if _, ok := st.Marks[key]; !ok {
			return false, fmt.Errorf("%s is not parked in %s; parked: %s", key, path, strings.Join(keys, ", "))
		}
		delete(st.Marks, key)
		return true, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "resumed %s; it starts with a full budget next time\n", key)
	return nil
}

// resumeKey returns the key that resume clears when it is given none: the
// one parked key of parked. It is an error, naming where, when nothing or
// several keys are parked (listed sorted, so that the user can name one).
func resumeKey(parked []string, where string) (string, error) {
	switch len(parked) {
	case 0:
		return "", fmt.Errorf("nothing is parked in %s", where)
	case 1:
		return parked[0], nil
	}
	return "", fmt.Errorf("several keys are parked in %s, name one: %s", where, strings.Join(slices.Sorted(slices.Values(parked)), ", "))
}
