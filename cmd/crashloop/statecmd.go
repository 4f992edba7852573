//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

const statusHelp = `Usage: crashloop status --state FILE [--json]

Prints what is parked in the state file: each key's reason, since when, its
starts and its last error (--json: the file's document). It only reads: it
creates no file and works in a read-only folder. A missing file is an error.
`

const resumeHelp = `Usage: crashloop resume --state FILE [KEY]

Clears the park of KEY (which may be left out when only one key is parked),
so that the next crashloop with that key starts the program with a full
budget.
`

// parseStateFlags parses the flags of status and resume. done is true when
// it has printed help.
func parseStateFlags(fs *flag.FlagSet, help string, args []string, stdout io.Writer) (state string, done bool, err error) {
	fs.SetOutput(io.Discard)
	fs.StringVar(&state, "state", "", "the state file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, help)
			return "", true, nil
		}
		return "", false, flagError(fs, err)
	}
	if state == "" {
		return "", false, usagef("%s needs --state FILE", fs.Name())
	}
	return state, false, nil
}

// statusCmd is "crashloop status".
func statusCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the state file's document")
	path, done, err := parseStateFlags(fs, statusHelp, args, stdout)
	if done || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("status takes no arguments, got %q", fs.Arg(0))
	}
	st, err := newStateStore(path).load(false)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	if len(st.Marks) == 0 {
		fmt.Fprintf(stdout, "nothing is parked in %s\n", path)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tREASON\tSINCE\tSTARTS\tLAST ERROR")
	for _, key := range st.keys() {
		m := st.Marks[key]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", key, m.Reason, m.Since.Format(time.RFC3339), m.Starts, m.LastError)
	}
	return tw.Flush()
}

// resumeCmd is "crashloop resume".
func resumeCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	path, done, err := parseStateFlags(fs, resumeHelp, args, stdout)
	if done || err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usagef("resume takes at most one KEY, got %d", fs.NArg())
	}
	store := newStateStore(path)
	if _, err := store.load(false); err != nil { // a missing file is an error, and no lock file is made for it
		return err
	}
	key := fs.Arg(0)
	err = store.update(func(st *stateFile) (bool, error) {
		keys := st.keys()
		switch {
		case key == "" && len(keys) == 1:
			key = keys[0]
		case key == "" && len(keys) == 0:
			return false, fmt.Errorf("nothing is parked in %s", path)
		case key == "":
			return false, fmt.Errorf("several keys are parked in %s, name one: %s", path, strings.Join(keys, ", "))
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
