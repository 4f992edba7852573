package replay

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Source is one history to replay. It is a plain value.
type Source struct {
	Name   string    // named in errors: a file name, say
	R      io.Reader // the history
	Format Format    // FormatAuto (the zero value) detects it
}

// SourceResult says what was read from one Source. It is a plain value.
type SourceResult struct {
	Name      string
	Format    Format // the format detected (or forced)
	Lines     int    // lines that were not blank
	Records   int    // records read
	Malformed int    // lines that could not be read
	Errors    []*LineError
	// Other counts the lines that are neither records nor malformed: the
	// supervised program's own lines in crashloop's log.
	Other int `json:"other_lines,omitempty"`
}

// Result is what Replay read and what each candidate would have done. It
// is a plain value.
type Result struct {
	Sources []SourceResult
	Reports []Report // one per candidate, in their order
}

// Replay reads the sources, merges them in time order (putting records up
// to Options.Reorder out of order back in order, per source) and feeds
// them through a Replayer for the candidates. Malformed lines are counted
// and reported in the Result, never fatal; Replay fails with an error
// wrapping ErrNoHistory only when not one record could be read from any
// source, with the error of a source that could not be read, and with the
// error of NewReplayer for candidates or options it rejects. It is safe
// for concurrent use with other calls (not on the same readers).
func Replay(sources []Source, cands []Candidate, opts Options) (*Result, error) {
	p, err := NewReplayer(cands, opts)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	res.Sources, err = readMerged(sources, p.opts.Reorder, p.Feed)
	if err != nil {
		return res, err
	}
	res.Reports = p.Finish()
	return res, nil
}

// readMerged reads the sources, merges them in time order (putting records
// up to reorder out of order back in order, per source) and hands each
// record to feed. It fails as Replay does: with a source's read error, or
// with ErrNoHistory when not one record could be read.
func readMerged(sources []Source, reorder time.Duration, feed func(Record)) ([]SourceResult, error) {
	var results []SourceResult
	streams := make([]*ordered, len(sources))
	for i, s := range sources {
		streams[i] = &ordered{r: NewReader(s.R, s.Name, s.Format), window: reorder}
	}
	var firstErr error
	m := &merge{}
	for _, s := range streams {
		if s.advance() {
			heap.Push(m, s)
		}
	}
	for m.Len() > 0 {
		s := (*m)[0]
		feed(s.head)
		if s.advance() {
			heap.Fix(m, 0)
		} else {
			heap.Pop(m)
		}
	}
	records := 0
	for i, s := range streams {
		bad, errs := s.r.Malformed()
		results = append(results, SourceResult{Name: sources[i].Name, Format: s.r.Format(), Lines: s.r.Lines(),
			Records: s.n, Malformed: bad, Errors: errs, Other: s.r.Other()})
		records += s.n
		if s.err != nil && !errors.Is(s.err, ErrNoHistory) && firstErr == nil {
			firstErr = s.err
		}
	}
	if firstErr != nil {
		return results, firstErr
	}
	if records == 0 {
		for _, s := range streams {
			if s.err != nil {
				return results, s.err
			}
		}
		// Lines read, none of them malformed, and no record: name each
		// source and what it was read as.
		var why []string
		for _, s := range results {
			why = append(why, fmt.Sprintf("%s: %d lines read as %s, none of them a start or an end of a run", s.Name, s.Lines, s.Format))
		}
		return results, fmt.Errorf("%w: %s", ErrNoHistory, strings.Join(why, "; "))
	}
	return results, nil
}

// ordered is one source's records, put back in time order within a
// window: a record is released once a record window later than it was
// read, or at the end.
type ordered struct {
	r      *Reader
	window time.Duration
	buf    recHeap
	seq    uint64
	latest time.Time
	eof    bool
	err    error
	head   Record
	n      int
}

// advance makes head the next record in order; false at the end.
func (o *ordered) advance() bool {
	for !o.eof && (o.buf.Len() == 0 || !o.buf.items[0].rec.Time.Add(o.window).Before(o.latest)) {
		rec, err := o.r.Next()
		if err != nil {
			o.eof = true
			if err != io.EOF {
				o.err = err
			}
			break
		}
		o.n++
		if rec.Time.After(o.latest) {
			o.latest = rec.Time
		}
		o.seq++
		heap.Push(&o.buf, seqRec{rec: rec, seq: o.seq})
	}
	if o.buf.Len() == 0 {
		return false
	}
	o.head = heap.Pop(&o.buf).(seqRec).rec
	return true
}

// seqRec is a record with the order it was read in, which breaks ties.
type seqRec struct {
	rec Record
	seq uint64
}

// recHeap orders records by time, then by the order they were read in.
type recHeap struct{ items []seqRec }

func (h *recHeap) Len() int { return len(h.items) }
func (h *recHeap) Less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	if c := a.rec.Time.Compare(b.rec.Time); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}
func (h *recHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *recHeap) Push(x any)    { h.items = append(h.items, x.(seqRec)) }
func (h *recHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// merge orders the sources by the time of their heads.
type merge []*ordered

func (m merge) Len() int           { return len(m) }
func (m merge) Less(i, j int) bool { return m[i].head.Time.Before(m[j].head.Time) }
func (m merge) Swap(i, j int)      { m[i], m[j] = m[j], m[i] }
func (m *merge) Push(x any)        { *m = append(*m, x.(*ordered)) }
func (m *merge) Pop() any {
	x := (*m)[len(*m)-1]
	*m = (*m)[:len(*m)-1]
	return x
}
