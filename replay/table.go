package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// MarshalText writes the format's name.
func (f Format) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// MarshalJSON writes {"source", "line", "error"}.
func (e *LineError) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Source string `json:"source"`
		Line   int    `json:"line"`
		Error  string `json:"error"`
	}{e.Source, e.Line, e.Err.Error()})
}

// WriteTable writes res as a table for people: what was read (with the
// malformed lines by number), then one column per candidate and one row
// per measure, then, for each of keys found in the history, the same rows
// for that key alone. horizon is the false-park horizon the replay used
// (0: the default, 24h), named in its row.
func WriteTable(w io.Writer, res *Result, keys []string, horizon time.Duration) error {
	if horizon == 0 {
		horizon = 24 * time.Hour
	}
	writeSources(w, res.Sources)
	if len(res.Reports) == 0 {
		return nil
	}
	r0 := res.Reports[0]
	fmt.Fprintf(w, "history: %s to %s (%s)", r0.First.Format(time.RFC3339), r0.Last.Format(time.RFC3339), Duration(r0.Last.Sub(r0.First)))
	if r0.Late > 0 {
		fmt.Fprintf(w, "; %d records out of order by more than the reorder window, judged at the latest time", r0.Late)
	}
	fmt.Fprintf(w, "\n\n")
	cols := make([]Measures, len(res.Reports))
	for i, r := range res.Reports {
		cols[i] = r.Totals
	}
	if err := writeMeasures(w, res, cols, horizon, true); err != nil {
		return err
	}
	for _, key := range keys {
		cols = cols[:0]
		for _, r := range res.Reports {
			for _, k := range r.Keys {
				if k.Key == key {
					cols = append(cols, k.measures())
				}
			}
		}
		if len(cols) == 0 {
			fmt.Fprintf(w, "\nkey %s: not in the history\n", key)
			continue
		}
		fmt.Fprintf(w, "\nkey %s\n", key)
		if err := writeMeasures(w, res, cols, horizon, false); err != nil {
			return err
		}
	}
	return nil
}

// writeSources writes what was read from each source, with the malformed
// lines by number.
func writeSources(w io.Writer, sources []SourceResult) {
	for _, s := range sources {
		fmt.Fprintf(w, "%s: %s, %d lines, %d records", s.Name, s.Format, s.Lines, s.Records)
		if s.Other > 0 {
			fmt.Fprintf(w, ", %d other lines (the program's own)", s.Other)
		}
		if s.Malformed > 0 {
			fmt.Fprintf(w, ", %d malformed", s.Malformed)
		}
		fmt.Fprintln(w)
		for _, e := range s.Errors {
			fmt.Fprintf(w, "  malformed: %v\n", e)
		}
		if s.Malformed > len(s.Errors) {
			fmt.Fprintf(w, "  ... and %d more\n", s.Malformed-len(s.Errors))
		}
	}
}

// measures returns the key's report as Measures.
func (k KeyReport) measures() Measures {
	m := Measures{}
	m.add(k)
	if k.Parks+k.NeedsHuman > 0 {
		m.ToParkMedian, m.ToParkMax = k.ToPark, k.ToPark
	}
	return m
}

// writeMeasures writes the rows of the measures, one column per candidate.
func writeMeasures(w io.Writer, res *Result, cols []Measures, horizon time.Duration, fleet bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, f func(i int, m Measures) string) {
		fmt.Fprint(tw, name)
		for i, m := range cols {
			fmt.Fprint(tw, "\t", f(i, m))
		}
		fmt.Fprintln(tw)
	}
	num := func(f func(m Measures) int) func(int, Measures) string {
		return func(_ int, m Measures) string { return strconv.Itoa(f(m)) }
	}
	row("", func(i int, _ Measures) string { return res.Reports[i].Name })
	if fleet {
		row("keys", num(func(m Measures) int { return m.Keys }))
	}
	row("runs", num(func(m Measures) int { return m.Runs }))
	row("failures", num(func(m Measures) int { return m.Failures }))
	row("restarts in the history", num(func(m Measures) int { return m.Restarts }))
	row("restarts it would allow", num(func(m Measures) int { return m.Allowed }))
	row("restarts spared", num(func(m Measures) int { return m.Spared }))
	row("keys parked or needs-human", num(func(m Measures) int { return m.ParkedKeys }))
	row("parks", num(func(m Measures) int { return m.Parks }))
	row("needs-human", num(func(m Measures) int { return m.NeedsHuman }))
	row("first failure to park (median/max)", func(_ int, m Measures) string {
		if m.Parks+m.NeedsHuman == 0 {
			return "-"
		}
		return Duration(m.ToParkMedian) + " / " + Duration(m.ToParkMax)
	})
	row("false parks (healthy within "+Duration(horizon)+")", num(func(m Measures) int { return m.FalseParks }))
	if cols[0].Stops > 0 {
		row("operator stops (not failures)", num(func(m Measures) int { return m.Stops }))
	}
	if cols[0].RestartsUnseen > 0 {
		row("restarts kubelet counted, not in the history", num(func(m Measures) int { return m.RestartsUnseen }))
	}
	if cols[0].InferredTimes > 0 {
		row("records at inferred times (aggregated events)", num(func(m Measures) int { return m.InferredTimes }))
	}
	row("extra delay over the history's gaps", func(_ int, m Measures) string {
		if m.Delayed == 0 {
			return "0"
		}
		return Duration(m.ExtraDelay) + " over " + errtext.Plural(m.Delayed, "restart")
	})
	probes, holds := false, false
	for _, m := range cols {
		probes, holds = probes || m.Probes > 0, holds || m.CauseHolds > 0
	}
	if probes {
		row("probes of a park (resumed it)", func(_ int, m Measures) string { return fmt.Sprintf("%d (%d)", m.Probes, m.ProbeResumes) })
	}
	if fleet && holds {
		row("holds on a shared cause", num(func(m Measures) int { return m.CauseHolds }))
	}
	if fleet {
		row("fleet trips", num(func(m Measures) int { return m.FleetTrips }))
		row("fleet held restarts for", func(_ int, m Measures) string { return Duration(m.FleetHeld) })
		row("restarts held", num(func(m Measures) int { return m.Held }))
		logged := false
		for _, r := range res.Reports {
			logged = logged || r.Log.Matched+r.Log.Mismatched > 0
		}
		if logged {
			row("decisions as the log recorded", func(i int, _ Measures) string {
				l := res.Reports[i].Log
				return fmt.Sprintf("%d of %d", l.Matched, l.Matched+l.Mismatched)
			})
		}
	}
	return tw.Flush()
}

// Duration writes d for people: to the millisecond under a minute, to the
// second under a day, and in days and hours beyond ("2d3h").
func Duration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	case d < 24*time.Hour:
		s := d.Round(time.Second).String()
		if strings.HasSuffix(s, "m0s") {
			s = s[:len(s)-2]
		}
		if strings.HasSuffix(s, "h0m") {
			s = s[:len(s)-2]
		}
		return s
	}
	h := int(d.Round(time.Hour) / time.Hour)
	if h%24 == 0 {
		return strconv.Itoa(h/24) + "d"
	}
	return strconv.Itoa(h/24) + "d" + strconv.Itoa(h%24) + "h"
}
