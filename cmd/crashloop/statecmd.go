//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

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
func parseStateFlags(fs *flagSet, help string, args []string, stdout io.Writer) (w where, done bool, err error) {
	fs.String(&w.state, "state", "", "the state file")
	fs.String(&w.redis.url, "redis", "", "the Redis server of the shared state")
	fs.String(&w.redis.prefix, "redis-prefix", "crashloop", "the deployment's prefix on Redis")
	fs.Duration(&w.redis.timeout, "redis-timeout", redisstore.DefaultTimeout, "the longest one call waits for Redis")
	w.redis.tlsFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, help)
			return w, true, nil
		}
		return w, false, flagError(fs.FlagSet, args, err)
	}
	switch {
	case w.state == "" && w.redis.url == "":
		return w, false, usagef("%s needs --state FILE or --redis URL", fs.Name())
	case w.state != "" && w.redis.url != "":
		return w, false, usagef("%s takes --state FILE or --redis URL, not both", fs.Name())
	case w.redis.timeout <= 0:
		return w, false, usagef("--redis-timeout: must be > 0")
	}
	return w, false, redisOnly(fs, w.redis.url)
}

// redisOnly refuses the flags that only make sense with --redis when url,
// its value, is "".
func redisOnly(fs *flagSet, url string) error {
	if url != "" {
		return nil
	}
	for _, name := range []string{"redis-prefix", "redis-timeout", "redis-ca", "redis-cert", "redis-key"} {
		if fs.isSet(name) {
			return usagef("--%s: only with --redis", name)
		}
	}
	return nil
}

// statusCmd is "crashloop status".
func statusCmd(args []string, stdout io.Writer) error {
	fs := newFlagSet("status")
	var asJSON bool
	fs.Bool(&asJSON, "json", false, "print a JSON document")
	w, done, err := parseStateFlags(fs, statusHelp, args, stdout)
	if done || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("status takes no arguments, got %q", fs.Arg(0))
	}
	if w.redis.url != "" {
		return statusRedis(w.redis, asJSON, stdout)
	}
	st, err := newStateStore(w.state).load(false)
	if err != nil {
		return err
	}
	doc := parkedDoc{Source: "state", Where: w.state, Parks: []parkDoc{}}
	for _, key := range st.keys() {
		doc.Parks = append(doc.Parks, st.Marks[key].park(key))
	}
	if asJSON {
		return printJSON(stdout, doc)
	}
	if len(doc.Parks) == 0 {
		fmt.Fprintf(stdout, "nothing is parked in %s\n", w.state)
		return nil
	}
	return printParks(stdout, doc.Parks)
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printParks prints parks as a table, in their order, EXIT the last exit
// status or signal ("-" if unknown), then when the next probe of each park
// that has one is due, then the stderr tail of each park that has one,
// indented. A key or an error that could break the table (a
// control character, which crashloop refuses in keys but another writer
// may have put on Redis) is quoted, and so is a line of a tail with a
// control character other than a tab (a terminal's escape sequence).
func printParks(w io.Writer, parks []parkDoc) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "KEY\tREASON\tSINCE\tATTEMPTS\tEXIT\tLAST ERROR\n")
	for _, p := range parks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", oneLine(p.Key), oneLine(p.Reason), time.Time(p.Since).Format(time.RFC3339), p.Attempts,
			exitColumn(p), oneLine(p.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range parks {
		if p.NextProbe != nil {
			fmt.Fprintf(w, "%s: next probe due at %s\n", oneLine(p.Key), time.Time(*p.NextProbe).Format(time.RFC3339))
		}
	}
	for _, p := range parks {
		if p.StderrTail == "" {
			continue
		}
		fmt.Fprintf(w, "\n%s, the last lines on stderr:\n", oneLine(p.Key))
		for _, line := range strings.Split(strings.TrimSuffix(p.StderrTail, "\n"), "\n") {
			if strings.ContainsFunc(line, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }) || !utf8.ValidString(line) {
				line = strconv.Quote(line)
			}
			fmt.Fprintf(w, "  | %s\n", line)
		}
	}
	return nil
}

// exitColumn is how a park's program ended in status's table: its exit
// status, the signal that killed it, such as "SIGKILL", or "-" if unknown.
func exitColumn(p parkDoc) string {
	switch {
	case p.Signal != "":
		return "SIG" + p.Signal
	case p.ExitCode != nil:
		return strconv.Itoa(*p.ExitCode)
	}
	return "-"
}

// oneLine returns s, quoted if it holds a control character.
func oneLine(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) >= 0 || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	return s
}

// resumeCmd is "crashloop resume".
func resumeCmd(args []string, stdout io.Writer) error {
	fs := newFlagSet("resume")
	w, done, err := parseStateFlags(fs, resumeHelp, args, stdout)
	if done || err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usagef("resume takes at most one KEY, got %d", fs.NArg())
	}
	if fs.NArg() == 1 {
		if why := checkKey(fs.Arg(0)); why != "" {
			return usagef("resume: KEY %s (leave KEY out to resume the one parked key)", why)
		}
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
	fmt.Fprintf(stdout, "resumed %s: %s\n", key, resumedHow)
	return nil
}

// resumedHow says what a resume does, after "resumed KEY: ".
const resumedHow = "a crashloop waiting on it (--on-park wait) starts it now, with a full budget; otherwise the next crashloop of the key does"

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
