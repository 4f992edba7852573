//go:build unix

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// commands are crashloop's subcommands, in the order they are listed.
var commands = []string{"status", "resume", "replay", "simulate", "tune", "plan", "help"}

// helpTopics are what "crashloop help TOPIC" explains, each with its
// text; "run" is supervising a program (crashloop --help).
var helpTopics = []struct {
	name string
	text func(io.Writer)
}{
	{"run", func(w io.Writer) { newSettings().printHelp(w) }},
	{"status", func(w io.Writer) { fmt.Fprint(w, statusHelp) }},
	{"resume", func(w io.Writer) { fmt.Fprint(w, resumeHelp) }},
	{"replay", func(w io.Writer) { fmt.Fprint(w, replayHelp) }},
	{"simulate", func(w io.Writer) { fmt.Fprint(w, simulateHelp) }},
	{"tune", func(w io.Writer) { fmt.Fprint(w, tuneHelp) }},
	{"plan", func(w io.Writer) { fmt.Fprint(w, planHelp) }},
	{"endpoints", func(w io.Writer) { fmt.Fprint(w, endpointsHelp) }},
	{"exit-status", printExitStatuses},
	{"limits", func(w io.Writer) { fmt.Fprint(w, limitsHelp) }},
	{"json", func(w io.Writer) { fmt.Fprint(w, jsonHelp) }},
}

// topicNames returns the names of the help topics.
func topicNames() []string {
	names := make([]string, len(helpTopics))
	for i, t := range helpTopics {
		names[i] = t.name
	}
	return names
}

// helpCmd is "crashloop help [TOPIC]".
func helpCmd(args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		fmt.Fprintf(stdout, "%s\nHelp topics: %s.\nRun crashloop help TOPIC, or crashloop COMMAND --help.\n", strings.TrimRight(helpIntro, "\n")+"\n", list(topicNames()))
		return nil
	case len(args) > 1:
		return usagef("help takes one TOPIC, got %d (topics: %s)", len(args), list(topicNames()))
	}
	for _, t := range helpTopics {
		if t.name == args[0] {
			t.text(stdout)
			return nil
		}
	}
	return usagef("unknown help topic %q%s; the topics are %s", args[0], suggest(args[0], topicNames()), list(topicNames()))
}

// unknownCommand is the error for a first argument that is neither a
// flag nor a command.
func unknownCommand(word string) error {
	return usagef("unknown command %q%s; the commands are %s; to supervise a program: crashloop [flags] -- PROGRAM [ARGS...]",
		word, suggest(word, commands), list(commands))
}

// suggest returns " (did you mean NAME?)" for the name nearest to word, if
// it is near enough to be a slip (an edit distance of at most a quarter
// of its length, and 1 for a short one), and "" otherwise.
func suggest(word string, names []string) string {
	best, dist := "", 3
	for _, n := range names {
		if d := editDistance(word, n); d < dist && d <= max(len(n)/4, 1) {
			best, dist = n, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}

// editDistance returns the Damerau-Levenshtein distance (insertions,
// deletions, substitutions and swaps of adjacent characters) between a
// and b.
func editDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	d := make([][]int, len(s)+1)
	for i := range d {
		d[i] = make([]int, len(t)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(s); i++ {
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(s)][len(t)]
}

// list writes names as "a, b and c".
func list(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(slices.Clone(names[:len(names)-1]), ", ") + " and " + names[len(names)-1]
}
