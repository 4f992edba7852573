package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/crashloopguard/crashloop"
)

// clLine is the part of a line of crashloop's JSON log that replay reads.
type clLine struct {
	Time      time.Time `json:"time"`
	Msg       string    `json:"msg"`
	Event     string    `json:"event"`
	Key       string    `json:"key"`
	Reason    string    `json:"reason"`
	Backoff   string    `json:"backoff"`
	Held      bool      `json:"held"`
	LastError string    `json:"last_error"`
}

// readyMsg is the message of crashloop's line for READY=1.
const readyMsg = "the program is ready (READY=1)"

// clKey is what the reader of crashloop's log knows of a key.
type clKey struct {
	seen    bool          // a run of the key ended before
	end     time.Time     // when the last run ended (the decision's time)
	wait    time.Duration // the backoff the decision logged
	running bool          // the start of the run under way was emitted
	parked  bool          // the last decision stopped the key
}

// crashloopLog reads crashloop's own --log-format json output. The log
// records each run's end (the decision's event, at the decision's time,
// with the backoff) and READY=1, but not a run's start: the start of a run
// after a restart is the previous decision's time plus its backoff; the
// first run of a key, and the first after a park (a later crashloop, after
// an operator's resume), start, as far as the log knows, when they end,
// and are healthy when the log judged them so.
type crashloopLog struct {
	keys map[string]*clKey
}

func newCrashloopLog() *crashloopLog { return &crashloopLog{keys: make(map[string]*clKey)} }

func (c *crashloopLog) line(b []byte, n int, out *[]Record) error {
	if b[0] != '{' {
		return errOther // the program's own line: it shares stderr with crashloop
	}
	var l clLine
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	if l.Time.IsZero() {
		return errors.New("no time")
	}
	var lg Logged
	healthy := false
	switch l.Event {
	case "":
		if l.Msg == readyMsg && l.Key != "" {
			c.begin(l.Key, l.Time, n, false, out)
			*out = append(*out, Record{Time: l.Time, Key: l.Key, Event: Ready, Line: n})
		}
		return nil
	case "agent.respawn_scheduled", "agent.restart_scheduled":
		wait, err := time.ParseDuration(l.Backoff)
		if err != nil {
			return fmt.Errorf("backoff %q: %v", l.Backoff, err)
		}
		lg = Logged{Event: l.Event, Action: "restart", Wait: wait}
		if l.Held {
			lg.Action = "hold"
		}
		healthy = l.Event == "agent.restart_scheduled"
	case "agent.startup_exhausted", "channel.crash_loop_tripped", "rescue.needs_human":
		lg = Logged{Event: l.Event, Action: "stop", Reason: l.Reason} // the park's reason code
		healthy = l.Event == "rescue.needs_human"
	case "agent.resumed":
		if k := c.keys[l.Key]; k != nil && k.parked {
			k.parked, k.seen = false, false
		}
		*out = append(*out, Record{Time: l.Time, Key: l.Key, Event: Resume, Line: n})
		return nil
	default:
		return nil // the fleet's events, the store's
	}
	if l.Key == "" {
		return fmt.Errorf("%s without a key", l.Event)
	}
	c.begin(l.Key, l.Time, n, healthy, out)
	code, failed := clExit(l.LastError)
	if l.Reason == crashloop.ReasonCleanExit {
		code, failed = 0, false
	}
	rec := Record{Time: l.Time, Key: l.Key, Event: Exit, Code: code, Failed: failed, Permanent: l.Reason == crashloop.ReasonPermanent,
		Cause: l.LastError, Line: n, Logged: &lg}
	*out = append(*out, rec)
	k := c.keys[l.Key]
	k.seen, k.end, k.wait, k.running, k.parked = true, l.Time, lg.Wait, false, lg.Action == "stop"
	return nil
}

// begin emits the start of the run of key under way at t, unless it was
// emitted already (see crashloopLog). healthy: the log judged the run
// healthy, which a run whose start the log does not know takes as Ready.
func (c *crashloopLog) begin(key string, t time.Time, n int, healthy bool, out *[]Record) {
	k := c.keys[key]
	if k == nil {
		k = &clKey{}
		c.keys[key] = k
	}
	if k.running {
		return
	}
	k.running = true
	if k.parked { // a later crashloop started the key again: an operator resumed it
		*out = append(*out, Record{Time: t, Key: key, Event: Resume, Line: n})
		k.parked, k.seen = false, false
	}
	if k.seen {
		at := k.end.Add(k.wait)
		if at.After(t) {
			at = t
		}
		*out = append(*out, Record{Time: at, Key: key, Event: Start, Line: n})
		return
	}
	*out = append(*out, Record{Time: t, Key: key, Event: Start, Line: n})
	if healthy {
		*out = append(*out, Record{Time: t, Key: key, Event: Ready, Line: n})
	}
}

func (c *crashloopLog) end(*[]Record) {}

var (
	exitedRe = regexp.MustCompile(`exited with status (\d+)`)
	killedRe = regexp.MustCompile(`killed by signal ([A-Z0-9]+)`)
)

// clExit reads the exit status from a last_error of crashloop's, such as
// "./app exited with status 1" or "./app killed by signal KILL".
func clExit(last string) (int, bool) {
	if m := exitedRe.FindStringSubmatch(last); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, true
	}
	if m := killedRe.FindStringSubmatch(last); m != nil {
		if sig, ok := signalNumber(m[1]); ok {
			return 128 + sig, true
		}
	}
	return -1, true
}
