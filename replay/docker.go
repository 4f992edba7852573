package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// dockerEvent is the part of a docker event that replay reads.
type dockerEvent struct {
	Type   string `json:"Type"`
	Action string `json:"Action"`
	ID     string `json:"id"`
	Actor  struct {
		ID         string            `json:"ID"`
		Attributes map[string]string `json:"Attributes"`
	} `json:"Actor"`
	Time     int64 `json:"time"`
	TimeNano int64 `json:"timeNano"`
}

// docker reads docker events --format '{{json .}}': a container's start and
// die (with its exitCode), and the oom and kill that tell why it died.
type docker struct {
	why map[string]string // keys whose run is under way: an oom or kill seen, "" if none
}

func newDocker() *docker { return &docker{why: make(map[string]string)} }

func (d *docker) line(b []byte, n int, out *[]Record) error {
	var e dockerEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return err
	}
	if e.Type != "container" && e.Type != "" {
		return nil // images, networks, volumes
	}
	key := e.Actor.Attributes["name"]
	if key == "" {
		key = e.Actor.ID
	}
	if key == "" {
		key = e.ID
	}
	if key == "" {
		return errors.New("no Actor.Attributes.name or id")
	}
	var t time.Time
	switch {
	case e.TimeNano > 0:
		t = time.Unix(0, e.TimeNano).UTC()
	case e.Time > 0:
		t = time.Unix(e.Time, 0).UTC()
	default:
		return errors.New("no timeNano or time")
	}
	rec := Record{Time: t, Key: key, Line: n}
	switch e.Action {
	case "start":
		rec.Event = Start
		d.why[key] = ""
	case "oom":
		d.why[key] = "oom"
		return nil
	case "kill":
		if d.why[key] == "" {
			d.why[key] = "killed by signal " + e.Actor.Attributes["signal"]
		}
		return nil
	case "die":
		s, ok := e.Actor.Attributes["exitCode"]
		code, err := strconv.Atoi(s)
		if !ok || err != nil {
			return fmt.Errorf("die without a numeric Actor.Attributes.exitCode (%q)", s)
		}
		rec.Event, rec.Code, rec.Failed, rec.Cause = Exit, code, code != 0, exitCause(code)
		if why := d.why[key]; why != "" {
			rec.Cause = why + ", " + rec.Cause
			rec.Failed = rec.Failed || why == "oom"
		}
		delete(d.why, key)
	default:
		return nil
	}
	*out = append(*out, rec)
	return nil
}

func (d *docker) end(*[]Record) {}
