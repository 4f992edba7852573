package replay

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crashloopguard/crashloop/internal/errtext"
)

// WriteTune writes t for people: what was read, what the history shows,
// the Pareto front as a table, the recommended policy and why (what each
// of its settings buys on the history), and the recommended policy beside
// the defaults, each compared configuration and a policy that never
// parks, in a table and in words.
func WriteTune(w io.Writer, t *Tuned) error {
	writeSources(w, t.Sources)
	fmt.Fprintf(w, "history: %s to %s (%s), %s of %s\n\n", t.First.Format(time.RFC3339), t.Last.Format(time.RFC3339),
		Duration(t.Last.Sub(t.First)), errtext.Plural(t.Records, "record"), errtext.Plural(t.Keys, "key"))
	if t.Loops == 0 {
		fmt.Fprintf(w, "The history shows no real crash loop (failures of a key with no run of %s without failing within %s of the first).\n",
			Duration(t.SoundRun), Duration(t.Horizon))
	} else {
		fmt.Fprintf(w, "The history shows %s (failures of a key with no run of %s without failing within %s of the first), of %s:\n"+
			"%s, each a restart to a policy that never parks.\n",
			errtext.Plural(t.Loops, "real crash loop"), Duration(t.SoundRun), Duration(t.Horizon), errtext.Plural(t.LoopKeys, "key"), errtext.Plural(t.LoopFailures, "failure"))
	}
	fmt.Fprintf(w, "Failures that stopped on their own within %s: %d (a park of one is false).\n", Duration(t.Horizon), t.Recovered)
	fmt.Fprintf(w, "\n%s judged (%d combinations of the grid are no valid configuration). The Pareto front of restarts spent\n"+
		"on the real crash loops, first failure to park, and false parks:\n\n", strconv.Itoa(t.Searched)+" policies", t.Invalid)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tloops parked\trestarts spent\tfirst failure to park (mean/max)\tfalse parks\tsettings beside the defaults")
	for _, v := range t.Front {
		fmt.Fprintf(tw, "%s\t%d of %d\t%d\t%s\t%d\t%s\n", v.Name, v.LoopsParked, t.Loops, v.Spent, toPark(v, t.Loops), v.FalseParks, settingsText(v))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	rec := t.Recommended
	fmt.Fprintf(w, "\nRecommended (tuned): %s.\n", configText(rec))
	switch {
	case !t.Feasible:
		fmt.Fprintf(w, "No policy searched parks falsely at most %d times: this one parks falsely the fewest, %d.\n", t.MaxFalseParks, rec.FalseParks)
	case t.Loops == 0:
		fmt.Fprintf(w, "With no real crash loop to park, it is the nearest to the defaults of those with at most %d false parks.\n", t.MaxFalseParks)
	default:
		fmt.Fprintf(w, "Of the policies with at most %d false parks, it parks the most real crash loops (%d of %d) and spends the\n"+
			"fewest restarts on them (%d, where a policy that never parks spends %d).\n", t.MaxFalseParks, rec.LoopsParked, t.Loops, rec.Spent, t.LoopFailures)
	}
	if len(t.Effects) > 0 {
		fmt.Fprintf(w, "\nWhy, on this history (each setting put back to its default, the rest kept):\n")
		for _, e := range t.Effects {
			fmt.Fprintf(w, "  %s %s (default %s): %s\n", e.Setting, e.Value, e.Default, effectText(e, rec, t.Loops))
		}
	}
	fmt.Fprintf(w, "\nThe recommended policy beside the defaults")
	for _, v := range t.Compared[1:] {
		fmt.Fprintf(w, ", %s", v.Name)
	}
	fmt.Fprintf(w, " and a policy that never parks:\n\n")
	cols := append(append([]Verdict{rec}, t.Compared...), t.NeverPark)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, f func(v Verdict) string) {
		fmt.Fprint(tw, name)
		for i, v := range cols {
			s := f(v)
			if i == len(cols)-1 && s == "" {
				s = "-"
			}
			fmt.Fprint(tw, "\t", s)
		}
		fmt.Fprintln(tw)
	}
	never := func(f func(v Verdict) string) func(v Verdict) string {
		return func(v Verdict) string {
			if v.Name == t.NeverPark.Name {
				return ""
			}
			return f(v)
		}
	}
	row("", func(v Verdict) string { return v.Name })
	row("real crash loops parked", func(v Verdict) string { return fmt.Sprintf("%d of %d", v.LoopsParked, t.Loops) })
	row("restarts spent on them", func(v Verdict) string { return strconv.Itoa(v.Spent) })
	row("first failure to park (mean/max)", func(v Verdict) string { return toPark(v, t.Loops) })
	row("false parks (healthy within "+Duration(t.Horizon)+")", func(v Verdict) string { return strconv.Itoa(v.FalseParks) })
	row("keys parked or needs-human", never(func(v Verdict) string { return strconv.Itoa(v.Totals.ParkedKeys) }))
	row("restarts it would allow", never(func(v Verdict) string { return strconv.Itoa(v.Totals.Allowed) }))
	row("extra delay over the history's gaps", never(func(v Verdict) string { return Duration(v.Totals.ExtraDelay) }))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for i, v := range t.Compared {
		name := "the defaults"
		if i > 0 {
			name = v.Name + " (" + settingsText(v) + ")"
		}
		fmt.Fprintf(w, "Beside %s: %s.\n", name, besideText(rec, v, t.Loops))
	}
	_, err := fmt.Fprintf(w, "Beside a policy that never parks: %s.\n", besideText(rec, t.NeverPark, t.Loops))
	return err
}

// toPark writes the mean and longest time from first failure to park.
func toPark(v Verdict, loops int) string {
	if loops == 0 {
		return "-"
	}
	return Duration(v.ToParkMean) + " / " + Duration(v.ToParkMax)
}

// configText writes every setting Tune searches of v's configuration.
func configText(v Verdict) string {
	var parts []string
	for _, s := range tuneSettings {
		parts = append(parts, s.name+" "+s.text(v.Config))
	}
	return strings.Join(parts, ", ")
}

// settingsText writes the settings in which v's configuration differs
// from the defaults.
func settingsText(v Verdict) string {
	var parts []string
	for _, s := range tuneSettings {
		if s.text(v.Config) != s.text(tuneDefaults()) {
			parts = append(parts, s.name+" "+s.text(v.Config))
		}
	}
	if len(parts) == 0 {
		return "the defaults"
	}
	return strings.Join(parts, ", ")
}

// effectText says what the recommended policy rec would do with the
// setting of e at its default.
func effectText(e SettingEffect, rec Verdict, loops int) string {
	if e.Invalid != "" {
		return "its default is no valid configuration with the other settings (" + e.Invalid + ")"
	}
	w := e.Without
	var parts []string
	if w.LoopsParked != rec.LoopsParked {
		parts = append(parts, fmt.Sprintf("it would park %d of the %s, not %d", w.LoopsParked, errtext.Plural(loops, "real crash loop"), rec.LoopsParked))
	}
	if w.FalseParks != rec.FalseParks {
		parts = append(parts, fmt.Sprintf("park falsely %s, not %d", errtext.Plural(w.FalseParks, "time"), rec.FalseParks))
	}
	if w.Spent != rec.Spent {
		parts = append(parts, fmt.Sprintf("spend %s on the loops, not %d", errtext.Plural(w.Spent, "restart"), rec.Spent))
	}
	if w.ToParkMean != rec.ToParkMean {
		parts = append(parts, fmt.Sprintf("park them %s after their first failure on average, not %s", Duration(w.ToParkMean), Duration(rec.ToParkMean)))
	}
	if w.Totals.ExtraDelay != rec.Totals.ExtraDelay {
		parts = append(parts, fmt.Sprintf("add %s of delay over the history's gaps, not %s", Duration(w.Totals.ExtraDelay), Duration(rec.Totals.ExtraDelay)))
	}
	if len(parts) == 0 {
		return "at its default, the same verdict on this history"
	}
	return "at its default, " + strings.Join(parts, "; ")
}

// besideText says how the recommended policy rec compares with v.
func besideText(rec, v Verdict, loops int) string {
	var parts []string
	if v.LoopsParked != rec.LoopsParked {
		parts = append(parts, fmt.Sprintf("parks %d of the %s where it parks %d", rec.LoopsParked, errtext.Plural(loops, "real crash loop"), v.LoopsParked))
	}
	if v.Spent != rec.Spent {
		parts = append(parts, fmt.Sprintf("spends %s on them where it spends %d", errtext.Plural(rec.Spent, "restart"), v.Spent))
	}
	if v.ToParkMean != rec.ToParkMean {
		verb := "parks them"
		if v.LoopsParked < loops {
			verb = "parks them (or reaches their last failure)"
		}
		parts = append(parts, fmt.Sprintf("%s %s after their first failure on average where it takes %s", verb, Duration(rec.ToParkMean), Duration(v.ToParkMean)))
	}
	if v.FalseParks != rec.FalseParks {
		parts = append(parts, fmt.Sprintf("parks falsely %s where it does %d", errtext.Plural(rec.FalseParks, "time"), v.FalseParks))
	}
	if len(parts) == 0 {
		return "the same verdict on this history"
	}
	return "tuned " + strings.Join(parts, "; ")
}
