package replay

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxHistoryRecords is the most records LoadHistory keeps: 4,000,000, at
// 32 bytes each 128 MB. A longer history is refused (ErrHistoryTooLong).
const MaxHistoryRecords = 4_000_000

// ErrHistoryTooLong is the error LoadHistory wraps when a history has more
// records than it keeps.
var ErrHistoryTooLong = errors.New("replay: history too long to keep in memory")

// History is a history read once into memory, in the order a replay judges
// it, to be judged many times (History.Replay, Tune). Each record takes 32
// bytes; keys and causes are kept once each. It is safe for concurrent
// use: nothing changes it after LoadHistory. Its zero value is a history
// of no record, which Tune refuses (ErrNoHistory).
type History struct {
	// Sources says what was read from each source.
	Sources []SourceResult
	keys    []string
	causes  []string
	recs    []histRecord
}

// histRecord is a Record in 32 bytes: what a Replayer reads of one.
type histRecord struct {
	sec     int64 // Unix seconds
	nsec    int32
	key     int32 // into History.keys
	cause   int32 // into History.causes
	code    int32
	counted int32
	event   uint8 // an Event
	flags   uint8
}

const (
	recFailed = 1 << iota
	recPermanent
	recInferred
)

// LoadHistory reads the sources once, in time order as Replay reads them
// (records up to reorder out of order are put back in order; a record
// later than that takes the latest time already read, as a Replayer would
// judge it), and keeps them. It fails as Replay does (ErrNoHistory, a
// source's read error), and with an error wrapping ErrHistoryTooLong for
// a history of more than MaxHistoryRecords records. A reorder of 0 is 1m.
// What crashloop's own log recorded of each decision is not kept: a
// History judges candidates, it does not check a log.
func LoadHistory(sources []Source, reorder time.Duration) (*History, error) {
	return loadHistory(sources, reorder, MaxHistoryRecords)
}

func loadHistory(sources []Source, reorder time.Duration, limit int) (*History, error) {
	if reorder < 0 {
		return nil, fmt.Errorf("replay: reorder %v: must be >= 0", reorder)
	}
	if reorder == 0 {
		reorder = time.Minute
	}
	h := &History{}
	keys, causes := map[string]int32{}, map[string]int32{}
	intern := func(m map[string]int32, list *[]string, s string) int32 {
		i, ok := m[s]
		if !ok {
			i = int32(len(*list))
			m[s] = i
			*list = append(*list, s)
		}
		return i
	}
	var now time.Time
	total := 0
	feed := func(rec Record) {
		if rec.Key == "" { // a Replayer judges none
			return
		}
		total++
		if total > limit || len(h.keys) >= math.MaxInt32 {
			return
		}
		t := rec.Time
		if t.Before(now) {
			t = now
		}
		now = t
		r := histRecord{sec: t.Unix(), nsec: int32(t.Nanosecond()), key: intern(keys, &h.keys, rec.Key), cause: -1, code: int32(rec.Code), counted: int32(min(rec.Counted, math.MaxInt32)), event: uint8(rec.Event)}
		if rec.Cause != "" {
			r.cause = intern(causes, &h.causes, rec.Cause)
		}
		if rec.Failed {
			r.flags |= recFailed
		}
		if rec.Permanent {
			r.flags |= recPermanent
		}
		if rec.Inferred {
			r.flags |= recInferred
		}
		h.recs = append(h.recs, r)
	}
	var err error
	h.Sources, err = readMerged(sources, reorder, feed)
	if err != nil {
		return nil, err
	}
	if total > limit {
		return nil, fmt.Errorf("%w: %d records, more than the %d kept; judge a shorter span of it", ErrHistoryTooLong, total, limit)
	}
	h.recs = h.recs[:len(h.recs):len(h.recs)]
	return h, nil
}

// Len returns the number of records kept.
func (h *History) Len() int { return len(h.recs) }

// Keys returns the number of keys.
func (h *History) Keys() int { return len(h.keys) }

// record returns the i-th record as a Replayer reads it.
func (h *History) record(i int) Record {
	r := &h.recs[i]
	rec := Record{Time: time.Unix(r.sec, int64(r.nsec)).UTC(), Key: h.keys[r.key], Event: Event(r.event), Code: int(r.code), Counted: int(r.counted),
		Failed: r.flags&recFailed != 0, Permanent: r.flags&recPermanent != 0, Inferred: r.flags&recInferred != 0}
	if r.cause >= 0 {
		rec.Cause = h.causes[r.cause]
	}
	return rec
}

// Replay judges the history under the candidates, as Replay judges the
// sources it was read from (but for what crashloop's own log recorded,
// which a History does not keep: Report.Log is zero). opts.Reorder is
// ignored: the history was put in order when it was read.
func (h *History) Replay(cands []Candidate, opts Options) ([]Report, error) {
	p, err := NewReplayer(cands, opts)
	if err != nil {
		return nil, err
	}
	for i := range h.recs {
		p.Feed(h.record(i))
	}
	return p.Finish(), nil
}
