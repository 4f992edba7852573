package replay

import (
	"bufio"
	"cmp"
	"fmt"
	"html"
	"io"
	"slices"
	"time"

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
	human   bool
}

// maxMarks is how many marks of a kind a key keeps before it halves their
// resolution.
const maxMarks = 2048

// marks are times, as buckets of q since the Timeline's first record.
type marks struct {
	q       time.Duration
	buckets []int64
}

func (m *marks) add(d time.Duration) {
	if m.q == 0 {
		m.q = time.Millisecond
	}
	b := int64(d / m.q)
	if n := len(m.buckets); n > 0 && m.buckets[n-1] == b {
		return
	}
	m.buckets = append(m.buckets, b)
	if len(m.buckets) > maxMarks {
		m.q *= 2
		out := m.buckets[:0]
		for _, b := range m.buckets {
			b /= 2
			if len(out) == 0 || out[len(out)-1] != b {
				out = append(out, b)
			}
		}
		m.buckets = out
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
	k.starts.add(at.Sub(t.first))
}

func (t *Timeline) fail(key string, at time.Time) { t.key(key, at).fails.add(at.Sub(t.first)) }

func (t *Timeline) park(cand int, key string, at time.Time, human bool) {
	k := t.key(key, at)
	k.spans[cand] = append(k.spans[cand], span{at: at, human: human})
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
	svgWidth  = 1000
	svgLabel  = 190 // the keys' names
	svgRight  = 20
	svgRow    = 14
	svgHeader = 34 // a panel's title and axis
)

// WriteSVG draws the timeline of a replay's reports: one panel per
// candidate on one time axis, one row per key (the busiest first, at most
// rows, saying so when there are more), starts as grey ticks and failures
// as red ones, each park shaded from the park to its resume or the end
// (orange; purple for needs-human), and the fleet breaker's trips as blue
// bands. It reads for an hour of history as for a month: the axis picks
// its step from the span. rows < 1 means 40.
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
	first, last := t.first, t.first
	if len(reports) > 0 && reports[0].Last.After(first) {
		last = reports[0].Last
	}
	span := max(last.Sub(first), time.Second)
	plot := float64(svgWidth - svgLabel - svgRight)
	x := func(d time.Duration) float64 { return svgLabel + plot*float64(d)/float64(span) }
	xt := func(at time.Time) float64 { return x(at.Sub(first)) }

	panel := svgHeader + svgRow*len(keys) + 10
	top := 40
	height := top + panel*max(len(reports), 1) + 10
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", svgWidth, height)
	title := fmt.Sprintf("crashloop replay: %s to %s (%s), %s", first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339),
		Duration(last.Sub(first)), errtext.Plural(total, "key"))
	if total > len(keys) {
		title += fmt.Sprintf("; the %d busiest shown", len(keys))
	}
	fmt.Fprintf(b, `<text x="10" y="18" font-size="13" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(b, `<text x="10" y="32" fill="#555">grey: start · red: failure · orange: parked · purple: needs-human · blue: fleet breaker tripped</text>`+"\n")
	step, layout := axisStep(span)
	for i, rep := range reports {
		y0 := top + panel*i
		body := y0 + svgHeader
		fmt.Fprintf(b, `<text x="10" y="%d" font-size="12" font-weight="bold">%s</text>`+"\n", y0+14, html.EscapeString(rep.Name))
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.0f" height="%d" fill="#f7f7f7" stroke="#ccc"/>`+"\n", svgLabel, body, plot, svgRow*len(keys))
		for tick := first.Truncate(step); !tick.After(last); tick = tick.Add(step) {
			if tick.Before(first) {
				continue
			}
			tx := xt(tick)
			fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", tx, body, tx, body+svgRow*len(keys))
			fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", tx, body-4, tick.UTC().Format(layout))
		}
		for _, tr := range rep.Trips {
			end := tr.Until
			if end.After(last) {
				end = last
			}
			fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#3b82f6" fill-opacity="0.25"/>`+"\n",
				xt(tr.At), body, max(xt(end)-xt(tr.At), 1), svgRow*len(keys))
		}
		for r, key := range keys {
			k := t.keys[key]
			ry := body + svgRow*r
			fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", svgLabel-6, ry+11, html.EscapeString(label(key)))
			for _, s := range k.spans[i] {
				end := s.end
				if end.IsZero() || end.After(last) {
					end = last
				}
				color := "#f59e0b"
				if s.human {
					color = "#8b5cf6"
				}
				fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.45"/>`+"\n",
					xt(s.at), ry+1, max(xt(end)-xt(s.at), 2), svgRow-2, color)
			}
			ticks(b, &k.starts, x, ry+2, ry+7, "#6b7280")
			ticks(b, &k.fails, x, ry+7, ry+13, "#dc2626")
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

// label shortens a key to fit the label column.
func label(key string) string {
	r := []rune(key)
	if len(r) > 30 {
		return "…" + string(r[len(r)-29:])
	}
	return key
}

// axisStep picks the step of the time axis for a span, for at most about
// ten ticks, and the layout of their labels.
func axisStep(span time.Duration) (time.Duration, string) {
	for _, s := range []struct {
		step   time.Duration
		layout string
	}{{time.Second, "15:04:05"}, {5 * time.Second, "15:04:05"}, {15 * time.Second, "15:04:05"}, {time.Minute, "15:04"},
		{5 * time.Minute, "15:04"}, {15 * time.Minute, "15:04"}, {time.Hour, "15:04"}, {3 * time.Hour, "01-02 15h"},
		{6 * time.Hour, "01-02 15h"}, {24 * time.Hour, "01-02"}, {2 * 24 * time.Hour, "01-02"}, {7 * 24 * time.Hour, "01-02"}} {
		if span/s.step <= 10 {
			return s.step, s.layout
		}
	}
	return 30 * 24 * time.Hour, "2006-01"
}
