package replay

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// dockerEvent is the part of a docker event that replay reads: the fields
// of API 1.22 and later (Type, Action, Actor), and those of the daemons
// before (status, id, from, time), which newer daemons still write beside.
type dockerEvent struct {
	Type   string `json:"Type"`
	Action string `json:"Action"`
	Status string `json:"status"`
	ID     string `json:"id"`
	Actor  struct {
		ID         string            `json:"ID"`
		Attributes map[string]string `json:"Attributes"`
	} `json:"Actor"`
	Time     int64 `json:"time"`
	TimeNano int64 `json:"timeNano"`
}

// docker reads docker events --format '{{json .}}': a container's start and
// die (with its exitCode), and the oom and kill that tell why it died. A
// die after a kill is an operator's stop (docker stop sends TERM, then
// KILL; docker kill, docker rm -f and docker restart a signal): Docker
// does not restart a container stopped so, and replay counts it as a
// stop, not a failure.
type docker struct {
	why  map[string]string // keys whose run is under way: "oom", "kill SIG,SIG", or "" if none
	inst map[string]string // a container name's first container id
}

func newDocker() *docker { return &docker{why: make(map[string]string), inst: make(map[string]string)} }

// shortID is a container id as docker ps shows it.
func shortID(id string) string { return id[:min(len(id), 12)] }

func (d *docker) line(b []byte, n int, out *[]Record) error {
	var e dockerEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return err
	}
	if e.Type != "container" && e.Type != "" {
		return nil // images, networks, volumes
	}
	action := cmp.Or(e.Action, e.Status) // before API 1.22, status
	id := cmp.Or(e.Actor.ID, e.ID)
	key := e.Actor.Attributes["name"]
	switch {
	case key == "" && id == "":
		return errors.New("no Actor.Attributes.name or id")
	case key == "":
		key = shortID(id) // before API 1.22 an event names no container
	case id != "":
		// A name reused by a new container (docker rm, then docker run
		// --name): one key per container.
		if first, ok := d.inst[key]; !ok {
			d.inst[key] = id
		} else if first != id {
			key += " (" + shortID(id) + ")"
		}
	}
	if strings.HasPrefix(action, "exec_") || strings.HasPrefix(action, "health_status") {
		return nil
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
	switch action {
	case "start":
		rec.Event = Start
		d.why[key] = ""
	case "oom":
		d.why[key] = "oom"
		return nil
	case "kill":
		switch why := d.why[key]; {
		case why == "":
			d.why[key] = "kill " + e.Actor.Attributes["signal"]
		case strings.HasPrefix(why, "kill "):
			d.why[key] = why + "," + e.Actor.Attributes["signal"]
		}
		return nil
	case "die":
		why := d.why[key]
		delete(d.why, key)
		s, ok := e.Actor.Attributes["exitCode"]
		if !ok && e.Action != "" {
			return errors.New("die without Actor.Attributes.exitCode")
		}
		if !ok {
			// Before API 1.22 a die says no exit status.
			rec.Event, rec.Code, rec.Failed, rec.Cause = Exit, -1, true, "died (the event says no exit status)"
			if strings.HasPrefix(why, "kill ") {
				rec.Event, rec.Failed, rec.Cause = Stop, false, "stopped (docker stop or kill)"
			}
			break
		}
		code, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("die with an exitCode that is not a number (%q)", s)
		}
		rec.Event, rec.Code, rec.Failed, rec.Cause = Exit, code, code != 0, exitCause(code)
		switch {
		case why == "oom":
			rec.Failed, rec.Cause = true, "oom, "+rec.Cause
		case strings.HasPrefix(why, "kill "):
			rec.Event, rec.Failed = Stop, false
			rec.Cause = "stopped (docker stop or kill: signal " + strings.TrimPrefix(why, "kill ") + "), " + rec.Cause
		}
	default:
		return nil
	}
	*out = append(*out, rec)
	return nil
}

func (d *docker) end(*[]Record) {}
