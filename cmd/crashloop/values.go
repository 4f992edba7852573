//go:build unix

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// flagSet is a flag.FlagSet whose flags refuse what the flag package lets
// pass silently: an empty value, a value with white space around it, a
// number that is not plain decimal (the flag package reads 010 as 8, 0x10
// as 16), and a second value of a flag registered once (--config: the
// last one would replace a whole file). Other flags given twice keep the
// last value, so that a script may append its own to a common set. It knows
// which flags were given, for crashloop's "flags override the config
// file" rule. A flagSet is not safe for concurrent use.
type flagSet struct {
	*flag.FlagSet
	given map[string]bool
}

// newFlagSet returns an empty flagSet named name that reports errors (as
// flagError words them) and prints no usage of its own.
func newFlagSet(name string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), given: map[string]bool{}}
	fs.SetOutput(io.Discard)
	return fs
}

// isSet reports whether the flag name was given on the command line.
func (fs *flagSet) isSet(name string) bool { return fs.given[name] }

// The ways a strict value may deviate from the rule.
const (
	repeatable = 1 << iota // each value adds to the others (--env, replay's --config)
	padded                 // white space around the value is part of it (--env)
	once                   // a second value is refused (--config)
)

// strictValue is a flag's value under the rules of flagSet.
type strictValue struct {
	flag.Value
	name  string
	fs    *flagSet
	mode  int
	first string // the value first given
	hint  string // what to do instead of giving an empty or blank value
	err   string // why the last Set failed, as flagError says it
}

// Var registers v under name with the rules of fs and the exceptions of
// mode.
func (fs *flagSet) Var(v flag.Value, name, usage string, mode int) {
	fs.FlagSet.Var(&strictValue{Value: v, name: name, fs: fs, mode: mode}, name, usage)
}

// hint adds what to do instead to the errors of an empty or blank value
// of the flag name.
func (fs *flagSet) hint(name, hint string) {
	fs.Lookup(name).Value.(*strictValue).hint = hint
}

// Int registers a decimal int flag.
func (fs *flagSet) Int(p *int, name string, def int, usage string) {
	*p = def
	fs.Var((*intValue)(p), name, usage, 0)
}

// Duration registers a duration flag.
func (fs *flagSet) Duration(p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationValue)(p), name, usage, 0)
}

// String registers a string flag.
func (fs *flagSet) String(p *string, name, def, usage string) {
	*p = def
	fs.Var((*stringValue)(p), name, usage, 0)
}

// Bool registers a bool flag.
func (fs *flagSet) Bool(p *bool, name string, def bool, usage string) {
	*p = def
	fs.Var((*boolValue)(p), name, usage, 0)
}

func (v *strictValue) Set(s string) error {
	v.err = ""
	switch {
	case v.fs.given[v.name] && v.mode&once != 0:
		v.err = fmt.Sprintf("given twice (%q, then %q): give it once", v.first, s)
	case s == "":
		v.err = "must not be empty"
	case strings.TrimSpace(s) == "":
		v.err = fmt.Sprintf("%q is blank", s)
	case v.mode&padded == 0 && strings.TrimSpace(s) != s:
		v.err = fmt.Sprintf("%q has white space around it", s)
	}
	if v.err != "" && v.hint != "" {
		v.err += " (" + v.hint + ")"
	}
	if v.err == "" {
		if err := v.Value.Set(s); err != nil {
			v.err = err.Error()
			if !strings.HasPrefix(v.err, `"`) { // it does not quote the value: quote it first
				v.err = fmt.Sprintf("%q %s", s, v.err)
			}
		}
	}
	if v.err != "" {
		return errors.New(v.err)
	}
	if !v.fs.given[v.name] {
		v.first = s
	}
	v.fs.given[v.name] = true
	return nil
}

// Get returns the value's Go value (an int, a time.Duration, a string...).
func (v *strictValue) Get() any {
	if g, ok := v.Value.(flag.Getter); ok {
		return g.Get()
	}
	return v.Value.String()
}

// IsBoolFlag tells the flag package that --NAME alone sets a bool flag.
func (v *strictValue) IsBoolFlag() bool {
	_, ok := v.Value.(*boolValue)
	return ok
}

// decimal is a whole number as crashloop reads it: decimal digits, no
// leading zero, an optional minus.
var decimal = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

type intValue int

func (i *intValue) Set(s string) error {
	if !decimal.MatchString(s) {
		return fmt.Errorf("%q is not a whole number such as 3 (decimal digits, no leading zero)", s)
	}
	n, err := strconv.ParseInt(s, 10, strconv.IntSize)
	if err != nil {
		return fmt.Errorf("%q is out of range", s)
	}
	*i = intValue(n)
	return nil
}

func (i *intValue) String() string { return strconv.Itoa(int(*i)) }
func (i *intValue) Get() any       { return int(*i) }

// durationSyntax is the syntax of time.ParseDuration: a duration it
// rejects with this syntax is out of range.
var durationSyntax = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?[a-zµμ]+)+$`)

// durationUnit is a unit in a duration's syntax.
var durationUnit = regexp.MustCompile(`[a-zµμ]+`)

type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	x, err := time.ParseDuration(s)
	switch {
	case err != nil && durationSyntax.MatchString(s) && strings.ContainsAny(s, "0123456789") && knownUnits(s):
		return fmt.Errorf("%q is out of range (at most 2562047h)", s)
	case err != nil:
		return fmt.Errorf("%q is not a duration such as 60s or 500ms", s)
	}
	*d = durationValue(x)
	return nil
}

// knownUnits reports whether every unit of s, a duration's syntax, is one
// that time.ParseDuration knows.
func knownUnits(s string) bool {
	for _, unit := range durationUnit.FindAllString(s, -1) {
		switch unit {
		case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		default:
			return false
		}
	}
	return true
}

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Get() any       { return time.Duration(*d) }

type stringValue string

func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }
func (v *stringValue) String() string     { return string(*v) }
func (v *stringValue) Get() any           { return string(*v) }

type boolValue bool

func (b *boolValue) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil || (s != "true" && s != "false") {
		return fmt.Errorf("%q is not true or false", s)
	}
	*b = boolValue(v)
	return nil
}

func (b *boolValue) String() string { return strconv.FormatBool(bool(*b)) }
func (b *boolValue) Get() any       { return bool(*b) }

// checkKey returns why key cannot be a key, "" if it can: keys are names
// printed on one line of a table and a log, so they are not empty, not
// blank, not padded, valid UTF-8 and without control characters.
func checkKey(key string) string {
	switch {
	case key == "":
		return "must not be empty"
	case strings.TrimSpace(key) == "":
		return fmt.Sprintf("%q is blank", key)
	case strings.TrimSpace(key) != key:
		return fmt.Sprintf("%q has white space around it", key)
	case !utf8.ValidString(key):
		return fmt.Sprintf("%q is not valid UTF-8", key)
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		return fmt.Sprintf("%q has a control character (a newline, a tab...)", key)
	}
	return ""
}
