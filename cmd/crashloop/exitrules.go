//go:build unix

package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/crashloopguard/crashloop"
)

// onExitValue is --on-exit MATCH=ACTION: each value adds a rule to the
// list it shares with --permanent-exit-codes, in the order they are given.
type onExitValue struct{ rules *[]crashloop.ExitRule }

func (v onExitValue) String() string {
	if v.rules == nil {
		return ""
	}
	parts := make([]string, len(*v.rules))
	for i, r := range *v.rules {
		parts[i] = string(r)
	}
	return strings.Join(parts, " ")
}

func (v onExitValue) Set(s string) error {
	r := crashloop.ExitRule(s)
	if ce, ok := errors.AsType[*crashloop.ConfigError](r.Check()); ok {
		return fmt.Errorf("%q must be %s", s, ce.Rule)
	}
	*v.rules = append(*v.rules, r)
	return nil
}

// permanentValue is --permanent-exit-codes CODES, shorthand for --on-exit
// CODES=park: it adds that rule to the list of --on-exit, and keeps the
// codes for replay.
type permanentValue struct {
	rules *[]crashloop.ExitRule
	codes *string // every code given, comma-separated
}

func (v permanentValue) String() string {
	if v.codes == nil {
		return ""
	}
	return *v.codes
}

func (v permanentValue) Set(s string) error {
	var codes []string
	for f := range strings.SplitSeq(s, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > 255 {
			return fmt.Errorf("%q is not an exit status from 1 to 255", f)
		}
		codes = append(codes, strconv.Itoa(c))
	}
	*v.rules = append(*v.rules, crashloop.ExitRule(strings.Join(codes, ",")+"=park"))
	if *v.codes != "" {
		*v.codes += ","
	}
	*v.codes += s
	return nil
}

// hasOOMRule reports whether a rule matches OOM kills.
func hasOOMRule(rules []crashloop.ExitRule) bool {
	for _, r := range rules {
		if match, _, _ := strings.Cut(string(r), "="); strings.EqualFold(match, "oom") {
			return true
		}
	}
	return false
}
