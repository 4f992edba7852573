// Package stamp writes and reads the times of crashloop's documents: RFC
// 3339 with nanoseconds in UTC, and the years RFC 3339 cannot hold written
// expanded (ISO 8601), as time.Format writes them.
package stamp

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Format writes t as RFC 3339 with nanoseconds, in UTC; a year outside 0 to
// 9999 is written expanded (ISO 8601), as time.Format writes it. It fails
// only for a time that does not read back as the same instant.
func Format(t time.Time) (string, error) {
	t = t.UTC()
	s := t.Format(time.RFC3339Nano)
	if y := t.Year(); y >= 0 && y <= 9999 {
		return s, nil // RFC 3339 proper: time.Parse reads it back
	}
	if back, err := Parse(s); err != nil || !back.Equal(t) {
		return "", fmt.Errorf("crashloop: snapshot: time %s cannot be written and read back", s)
	}
	return s, nil
}

// Parse reads a time written by Format: RFC 3339, or RFC 3339 with an
// expanded year (a sign, or more than four digits).
func Parse(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil {
		return t, nil
	}
	i := 0
	if strings.HasPrefix(s, "-") {
		i = 1
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j-i < 4 || (i == 0 && j == 4) || j == len(s) || s[j] != '-' {
		return time.Time{}, err
	}
	year, yerr := strconv.Atoi(s[:j])
	if yerr != nil {
		return time.Time{}, err
	}
	rest, err := time.Parse(time.RFC3339Nano, "2000"+s[j:]) // a leap year: any day reads
	if err != nil {
		return time.Time{}, err
	}
	t = time.Date(year, rest.Month(), rest.Day(), rest.Hour(), rest.Minute(), rest.Second(), rest.Nanosecond(), rest.Location())
	if t.Day() != rest.Day() {
		return time.Time{}, fmt.Errorf("parsing time %q: day out of range", s)
	}
	return t, nil
}
