package replay

import (
	"bufio"
	"cmp"
	"fmt"
	"html"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
)

// Timeline collects what a replay needs to draw: each key's starts and
// failures, and each candidate's parks of it. Marks are kept at a
// resolution that coarsens as a key's marks grow (at most 2,048 of each
// kind per key), so a Timeline, like a replay, keeps state per key, never
// per record. Set it as Options.Timeline; WriteSVG draws it. A Timeline is
// not safe for concurrent use; its zero value is not usable: create one
// with NewTimeline.
type Timeline struct {
	keys  map[string]*tlKey
	first time.Time
	any   bool
}

// NewTimeline returns an empty Timeline.
func NewTimeline() *Timeline { return &Timeline{keys: make(map[string]*tlKey)} }

// tlKey is what a Timeline keeps of one key.
type tlKey struct {
	runs   int
	starts marks
	fails  marks
	spans  map[int][]span // by candidate
}

// span is a park: from at to end (zero: to the end of the history).
type span struct {
	at, end time.Time
	reason  string // the park's reason code
}

// maxMarks is how many marks of a kind a key keeps before it halves their
// resolution.
const maxMarks = 2048

// marks are times, as buckets of q since the Timeline's first record;
// with notes (failures), what each bucket's marks were.
type marks struct {
	q       time.Duration
	buckets []int64
	notes   []note // by bucket, when kept
}

// note is what the marks of one bucket were: how many, and the last one's
// exit status (-1: not recorded) and cause.
type note struct {
	n     int
	code  int
	cause string
}

// add marks d; with keep, it notes the mark's code and cause.
func (m *marks) add(d time.Duration, keep bool, code int, cause string) {
	if m.q == 0 {
		m.q = time.Millisecond
	}
	b := int64(d / m.q)
	if n := len(m.buckets); n > 0 && m.buckets[n-1] == b {
		if keep {
			m.notes[n-1] = note{n: m.notes[n-1].n + 1, code: code, cause: cause}
		}
		return
	}
	m.buckets = append(m.buckets, b)
	if keep {
		m.notes = append(m.notes, note{n: 1, code: code, cause: cause})
	}
	if len(m.buckets) > maxMarks {
		m.q *= 2
		out, notes := m.buckets[:0], m.notes[:0]
		for i, b := range m.buckets {
			b /= 2
			if len(out) > 0 && out[len(out)-1] == b {
				if keep {
					last := &notes[len(notes)-1]
					*last = note{n: last.n + m.notes[i].n, code: m.notes[i].code, cause: m.notes[i].cause}
				}
				continue
			}
			out = append(out, b)
			if keep {
				notes = append(notes, m.notes[i])
			}
		}
		m.buckets, m.notes = out, notes
	}
}

func (t *Timeline) key(key string, at time.Time) *tlKey {
	if !t.any {
		t.first, t.any = at, true
	}
	k := t.keys[key]
	if k == nil {
		k = &tlKey{spans: make(map[int][]span)}
		t.keys[key] = k
	}
	return k
}

func (t *Timeline) start(key string, at time.Time) {
	k := t.key(key, at)
	k.runs++
	k.starts.add(at.Sub(t.first), false, 0, "")
}

func (t *Timeline) fail(key string, at time.Time, code int, cause string) {
	t.key(key, at).fails.add(at.Sub(t.first), true, code, cause)
}

func (t *Timeline) park(cand int, key string, at time.Time, reason string) {
	k := t.key(key, at)
	k.spans[cand] = append(k.spans[cand], span{at: at, reason: reason})
}

func (t *Timeline) resume(cand int, key string, at time.Time) {
	if k := t.keys[key]; k != nil {
		if s := k.spans[cand]; len(s) > 0 && s[len(s)-1].end.IsZero() {
			s[len(s)-1].end = at
		}
	}
}

// Layout of the picture, in pixels.
const (
	svgWidth  = 1000 // with keys' names that fit svgLabel; wider with longer ones
	svgLabel  = 190  // the keys' names, at least
	svgRight  = 20
	svgRow    = 14
	svgHeader = 34 // a panel's title and axis
	// svgChar is the most a character of the 11px sans-serif takes, on
	// average over a name or a time: names and axis labels are measured
	// with it so that none is cut or overlaps another.
	svgChar = 6.6
)

// WriteSVG draws the timeline of a replay's reports: one panel per
// candidate on one time axis, one row per key (the busiest first, at most
// rows, saying so when there are more) named in whole (the picture widens
// for long names), starts as grey ticks and failures as red ones, each
// park shaded from the park to its resume or the end (orange; purple for
// needs-human), and the fleet breaker's trips as blue bands; a legend
// counts each. Every failure, park and trip has a <title> (a viewer's
// tooltip) with its time and its cause: a failure's exit status and
// cause, a park's reason, a trip's reason. It reads for an hour of
// history as for years: the axis picks its step from the span so that its
// labels never overlap. rows < 1 means 40.
func (t *Timeline) WriteSVG(w io.Writer, reports []Report, rows int) error {
	if rows < 1 {
		rows = 40
	}
	keys := make([]string, 0, len(t.keys))
	for k := range t.keys {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(t.keys[b].runs, t.keys[a].runs), cmp.Compare(a, b)) })
	total := len(keys)
	keys = keys[:min(len(keys), rows)]
	labelW := svgLabel
	for _, k := range keys {
		labelW = max(labelW, int(float64(utf8.RuneCountInString(k))*svgChar)+12)
	}
	width := svgWidth - svgLabel + labelW
	first, last := t.first, t.first
	if len(reports) > 0 && reports[0].Last.After(first) {
		last = reports[0].Last
	}
	span := max(last.Sub(first), time.Second)
	plot := float64(width - labelW - svgRight)
	x := func(d time.Duration) float64 { return float64(labelW) + plot*float64(d)/float64(span) }
	xt := func(at time.Time) float64 { return x(at.Sub(first)) }

	panel := svgHeader + svgRow*len(keys) + 10
	top := 40
	height := top + panel*max(len(reports), 1) + 10
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	title := fmt.Sprintf("crashloop replay: %s to %s (%s), %s", first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339),
		Duration(last.Sub(first)), errtext.Plural(total, "key"))
	if total > len(keys) {
		title += fmt.Sprintf("; the %d busiest shown", len(keys))
	}
	fmt.Fprintf(b, `<text x="10" y="18" font-size="13" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	var runs, failures int
	if len(reports) > 0 {
		runs, failures = reports[0].Totals.Runs, reports[0].Totals.Failures
	}
	fmt.Fprintf(b, `<text x="10" y="32" fill="#555">grey: start (%d) · red: failure (%d) · orange: parked · purple: needs-human · blue: fleet breaker tripped</text>`+"\n",
		runs, failures)
	ticksAt := axisTicks(first, last, plot)
	for i, rep := range reports {
		y0 := top + panel*i
		body := y0 + svgHeader
		tot := rep.Totals
		fmt.Fprintf(b, `<text x="10" y="%d" font-size="12" font-weight="bold">%s: %s · %s · %s</text>`+"\n", y0+14, html.EscapeString(rep.Name),
			errtext.Plural(tot.Parks, "park"), strconv.Itoa(tot.NeedsHuman)+" needs-human", errtext.Plural(tot.FleetTrips, "fleet trip"))
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.0f" height="%d" fill="#f7f7f7" stroke="#ccc"/>`+"\n", labelW, body, plot, svgRow*len(keys))
		for _, tk := range ticksAt {
			tx := xt(tk.at)
			fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", tx, body, tx, body+svgRow*len(keys))
			fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", tx, body-4, tk.label)
		}
		for _, tr := range rep.Trips {
			end := tr.Until
			if end.After(last) {
				end = last
			}
			fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#3b82f6" fill-opacity="0.25"><title>%s</title></rect>`+"\n",
				xt(tr.At), body, max(xt(end)-xt(tr.At), 1), svgRow*len(keys),
				html.EscapeString(fmt.Sprintf("fleet breaker tripped (%s) from %s to %s", tr.Reason, stamp(tr.At), stamp(end))))
		}
		for r, key := range keys {
			k := t.keys[key]
			ry := body + svgRow*r
			fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-6, ry+11, html.EscapeString(key))
			for _, s := range k.spans[i] {
				end := s.end
				if end.IsZero() || end.After(last) {
					end = last
				}
				color, what := "#f59e0b", "parked"
				if s.reason == crashloop.ReasonNeedsHuman {
					color, what = "#8b5cf6", "needs-human"
				}
				fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.45"><title>%s</title></rect>`+"\n",
					xt(s.at), ry+1, max(xt(end)-xt(s.at), 2), svgRow-2, color,
					html.EscapeString(fmt.Sprintf("%s: %s (%s) from %s to %s", key, what, s.reason, stamp(s.at), stamp(end))))
			}
			ticks(b, &k.starts, x, ry+2, ry+7, "#6b7280")
			failureMarks(b, key, &k.fails, first, x, ry+7, ry+13)
		}
	}
	fmt.Fprintln(b, "</svg>")
	return b.Flush()
}

// ticks draws marks as one path of short vertical lines.
func ticks(b *bufio.Writer, m *marks, x func(time.Duration) float64, y1, y2 int, color string) {
	if len(m.buckets) == 0 {
		return
	}
	fmt.Fprintf(b, `<path stroke="%s" stroke-width="1" d="`, color)
	prev := -1.0
	for _, bk := range m.buckets {
		tx := x(time.Duration(bk) * m.q)
		if tx-prev < 0.5 { // the same pixel
			continue
		}
		prev = tx
		fmt.Fprintf(b, "M%.1f %dV%d", tx, y1, y2)
	}
	fmt.Fprintln(b, `"/>`)
}

// failureMarks draws failures as short red lines, one element per pixel,
// each with a <title>: when, the cause and exit status of the last one,
// and how many the pixel holds.
func failureMarks(b *bufio.Writer, key string, m *marks, first time.Time, x func(time.Duration) float64, y1, y2 int) {
	flush := func(tx float64, from, to time.Time, nt note) {
		when := stamp(from)
		if to.After(from) {
			when += " to " + stamp(to)
		}
		what := key + ", " + when + ": "
		if nt.n > 1 {
			what += fmt.Sprintf("%d failures, the last: ", nt.n)
		}
		what += failureText(nt)
		fmt.Fprintf(b, `<path stroke="#dc2626" stroke-width="1" d="M%.1f %dV%d"><title>%s</title></path>`+"\n", tx, y1, y2, html.EscapeString(what))
	}
	var (
		px       = -1.0
		from, to time.Time
		acc      note
	)
	for i, bk := range m.buckets {
		d := time.Duration(bk) * m.q
		tx := x(d)
		if px >= 0 && tx-px < 0.5 { // the same pixel
			acc = note{n: acc.n + m.notes[i].n, code: m.notes[i].code, cause: m.notes[i].cause}
			to = first.Add(d)
			continue
		}
		if px >= 0 {
			flush(px, from, to, acc)
		}
		px, from, to, acc = tx, first.Add(d), first.Add(d), m.notes[i]
	}
	if px >= 0 {
		flush(px, from, to, acc)
	}
}

// failureText says a failure's cause and exit status.
func failureText(nt note) string {
	cause := nt.cause
	if cause == "" {
		cause = "failed"
	}
	switch {
	case nt.code < 0:
		return cause + " (exit status not recorded)"
	case strings.Contains(cause, "status "+strconv.Itoa(nt.code)):
		return cause
	}
	return cause + " (exit status " + strconv.Itoa(nt.code) + ")"
}

// stamp writes a time of the picture's titles.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// tick is a labelled time of the axis.
type tick struct {
	at    time.Time
	label string
}

// axisTicks returns the ticks of the time axis from first to last, over
// plot pixels: the smallest step whose labels, each at most svgChar a
// character wide and 8 pixels apart, never overlap. Steps of a month and
// more fall on the months' first days.
func axisTicks(first, last time.Time, plot float64) []tick {
	span := max(last.Sub(first), time.Second)
	const day = 24 * time.Hour
	for _, s := range []struct {
		step   time.Duration
		months int
		layout string
	}{{time.Second, 0, "15:04:05"}, {5 * time.Second, 0, "15:04:05"}, {15 * time.Second, 0, "15:04:05"}, {time.Minute, 0, "15:04"},
		{5 * time.Minute, 0, "15:04"}, {15 * time.Minute, 0, "15:04"}, {time.Hour, 0, "15:04"}, {3 * time.Hour, 0, "01-02 15h"},
		{6 * time.Hour, 0, "01-02 15h"}, {12 * time.Hour, 0, "01-02 15h"}, {day, 0, "01-02"}, {2 * day, 0, "01-02"},
		{7 * day, 0, "01-02"}, {14 * day, 0, "01-02"}, {0, 1, "2006-01"}, {0, 3, "2006-01"}, {0, 6, "2006-01"}, {0, 12, "2006"},
		{0, 24, "2006"}, {0, 60, "2006"}, {0, 120, "2006"}, {0, 600, "2006"}} {
		if s.months == 0 && span/s.step > 400 {
			continue // far too many: not worth listing
		}
		var out []tick
		if s.months == 0 {
			for t := first.UTC().Truncate(s.step); !t.After(last); t = t.Add(s.step) {
				if !t.Before(first) {
					out = append(out, tick{t, t.Format(s.layout)})
				}
			}
		} else {
			f := first.UTC()
			m := (f.Year()*12 + int(f.Month()) - 1) / s.months * s.months
			for t := time.Date(m/12, time.Month(m%12+1), 1, 0, 0, 0, 0, time.UTC); !t.After(last); t = t.AddDate(0, s.months, 0) {
				if !t.Before(first) {
					out = append(out, tick{t, t.Format(s.layout)})
				}
			}
		}
		if fits(out, span, plot) {
			return out
		}
	}
	return nil
}

// fits reports whether the ticks' labels, centred on their times over
// plot pixels, keep 8 pixels apart.
func fits(ts []tick, span time.Duration, plot float64) bool {
	for i := 1; i < len(ts); i++ {
		a, b := ts[i-1], ts[i]
		gap := plot * float64(b.at.Sub(a.at)) / float64(span)
		if gap < (float64(utf8.RuneCountInString(a.label))+float64(utf8.RuneCountInString(b.label)))*svgChar/2+8 {
			return false
		}
	}
	return true
}
