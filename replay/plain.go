package replay

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// csvParser reads the plain CSV form: time,key,event,code, with an
// optional header line naming those columns.
type csvParser struct{}

func (csvParser) line(b []byte, n int, out *[]Record) error {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	fields, err := r.Read()
	if err != nil {
		return err
	}
	if n == 1 && len(fields) > 0 && strings.EqualFold(strings.TrimSpace(fields[0]), "time") {
		return nil // the header
	}
	if len(fields) < 3 || len(fields) > 4 {
		return fmt.Errorf("%d fields, want time,key,event[,code]", len(fields))
	}
	code := ""
	if len(fields) == 4 {
		code = fields[3]
	}
	rec, err := plainRecord(strings.TrimSpace(fields[0]), fields[1], strings.TrimSpace(fields[2]), strings.TrimSpace(code), n)
	if err != nil {
		return err
	}
	*out = append(*out, rec)
	return nil
}

func (csvParser) end(*[]Record) {}

// jsonlParser reads the plain JSON-lines form: {"time": RFC 3339 or Unix
// seconds, "key", "event", "code"}.
type jsonlParser struct{}

type jsonlLine struct {
	Time  json.RawMessage `json:"time"`
	Key   string          `json:"key"`
	Event string          `json:"event"`
	Code  *int            `json:"code"`
}

func (jsonlParser) line(b []byte, n int, out *[]Record) error {
	var l jsonlLine
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	ts := string(l.Time)
	switch {
	case len(l.Time) == 0:
		return errors.New("no time")
	case l.Time[0] == '"':
		if err := json.Unmarshal(l.Time, &ts); err != nil {
			return err
		}
	default:
		if _, ok := unixSeconds(ts); !ok {
			return fmt.Errorf("time %s: neither RFC 3339 text nor Unix seconds", l.Time)
		}
	}
	code := ""
	if l.Code != nil {
		code = strconv.Itoa(*l.Code)
	}
	rec, err := plainRecord(ts, l.Key, l.Event, code, n)
	if err != nil {
		return err
	}
	*out = append(*out, rec)
	return nil
}

func (jsonlParser) end(*[]Record) {}

// plainRecord builds the record of a plain line. The time is RFC 3339 text
// or Unix seconds (secs, or text that is a number); an exit's code is its
// status (128+N for signal N), a failure of unknown status when empty.
func plainRecord(ts string, key, event, code string, n int) (Record, error) {
	rec := Record{Key: key, Line: n}
	if key == "" {
		return rec, errors.New("empty key")
	}
	if t, ok := unixSeconds(ts); ok {
		rec.Time = t
	} else {
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return rec, fmt.Errorf("time %q: neither RFC 3339 nor Unix seconds", ts)
		}
		rec.Time = t
	}
	ev, ok := parseEvent(event)
	if !ok {
		return rec, fmt.Errorf("event %q: not start, exit, ready, resume or stop", event)
	}
	rec.Event = ev
	if ev == Exit {
		rec.Code, rec.Failed = -1, true
		if code != "" {
			c, err := strconv.Atoi(code)
			if err != nil || c < 0 || c > 255 {
				return rec, fmt.Errorf("code %q: not an exit status 0-255", code)
			}
			rec.Code, rec.Failed = c, c != 0
		}
		rec.Cause = "exited with unknown status"
		if rec.Code >= 0 {
			rec.Cause = exitCause(rec.Code)
		}
	} else if code != "" {
		return rec, fmt.Errorf("code %q on a %s: only an exit has a code", code, ev)
	}
	return rec, nil
}

// unixSeconds reads Unix seconds with an optional fraction of up to nine
// digits, exactly ("1714557601.2").
func unixSeconds(s string) (time.Time, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec <= 0 || sec > 1e11 || len(frac) > 9 {
		return time.Time{}, false
	}
	var ns int64
	if frac != "" {
		n, err := strconv.ParseUint(frac, 10, 32)
		if err != nil {
			return time.Time{}, false
		}
		ns = int64(n)
		for range 9 - len(frac) {
			ns *= 10
		}
	}
	return time.Unix(sec, ns).UTC(), true
}
