package replay

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// kubeItem is the part of an item of kubectl get events -o json or
// kubectl get pods -o json that replay reads.
type kubeItem struct {
	Kind           string `json:"kind"`
	InvolvedObject *struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		FieldPath string `json:"fieldPath"`
	} `json:"involvedObject"`
	Reason         string     `json:"reason"`
	FirstTimestamp *time.Time `json:"firstTimestamp"`
	LastTimestamp  *time.Time `json:"lastTimestamp"`
	EventTime      *time.Time `json:"eventTime"`
	Count          int        `json:"count"`
	Metadata       struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
	Status *struct {
		ContainerStatuses []kubeContainer `json:"containerStatuses"`
	} `json:"status"`
}

type kubeContainer struct {
	Name         string    `json:"name"`
	RestartCount int       `json:"restartCount"`
	State        kubeState `json:"state"`
	LastState    kubeState `json:"lastState"`
}

type kubeState struct {
	Running *struct {
		StartedAt time.Time `json:"startedAt"`
	} `json:"running"`
	Terminated *struct {
		ExitCode   int       `json:"exitCode"`
		Signal     int       `json:"signal"`
		Reason     string    `json:"reason"`
		StartedAt  time.Time `json:"startedAt"`
		FinishedAt time.Time `json:"finishedAt"`
	} `json:"terminated"`
}

// kubeReader reads a Kubernetes List. Events are aggregated (an event
// with count N happened N times from firstTimestamp to lastTimestamp; they
// are spread evenly over that span) and not in time order, so the whole
// list is read and sorted: the API keeps events for an hour by default,
// so a list is small.
type kubeReader struct {
	src   io.Reader
	first int // the line the document starts on
	done  bool
}

func newKubeReader(src io.Reader, line int) *kubeReader { return &kubeReader{src: src, first: line} }

// kubeOcc is one occurrence of an event of a key.
type kubeOcc struct {
	t      time.Time
	key    string
	reason string
	item   int
}

// next reads the whole list into r.pending, sorted by time.
func (k *kubeReader) next(r *Reader) {
	if k.done {
		r.finish(io.EOF)
		return
	}
	k.done = true
	dec := json.NewDecoder(k.src)
	if err := kubeItems(dec); err != nil {
		r.malformed(k.first, err)
		r.finish(io.EOF)
		return
	}
	var occs []kubeOcc
	var recs []Record
	for n := 1; dec.More(); n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			r.malformed(n, fmt.Errorf("item %d: %v (the list is cut short here)", n, err))
			break
		}
		var it kubeItem
		if err := json.Unmarshal(raw, &it); err != nil {
			r.malformed(n, fmt.Errorf("item %d: %v", n, err))
			continue
		}
		var err error
		switch {
		case it.InvolvedObject != nil:
			occs, err = kubeEvent(&it, n, occs)
		case it.Status != nil:
			recs, err = kubePod(&it, n, recs)
		default:
			err = errors.New("neither an Event (involvedObject) nor a Pod (status.containerStatuses)")
		}
		if err != nil {
			r.malformed(n, fmt.Errorf("item %d: %v", n, err))
		}
	}
	recs = append(recs, kubeRuns(occs)...)
	slices.SortStableFunc(recs, func(a, b Record) int { return a.Time.Compare(b.Time) })
	r.pending = append(r.pending, recs...)
	if len(r.pending) == 0 {
		r.finish(io.EOF)
	}
}

// kubeItems moves dec to the first item of the List's "items".
func kubeItems(dec *json.Decoder) error {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("not a Kubernetes List (kubectl get events -o json or kubectl get pods -o json)")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("the List: %v", err)
		}
		if t == "items" {
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return errors.New(`"items" is not an array`)
			}
			return nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("the List: %v", err)
		}
	}
	return errors.New(`a List without "items"`)
}

// kubeEvent adds the occurrences of a core/v1 Event.
func kubeEvent(it *kubeItem, n int, occs []kubeOcc) ([]kubeOcc, error) {
	switch it.Reason {
	case "Started", "BackOff", "Killing", "Failed":
	default:
		return occs, nil
	}
	o := it.InvolvedObject
	if o.Name == "" {
		return occs, errors.New("involvedObject without a name")
	}
	key := o.Namespace + "/" + o.Name
	if c, ok := containerOf(o.FieldPath); ok {
		key += "/" + c
	}
	first, last := it.FirstTimestamp, it.LastTimestamp
	if first == nil {
		first = it.EventTime
	}
	if last == nil {
		last = first
	}
	if first == nil {
		return occs, errors.New("no firstTimestamp, lastTimestamp or eventTime")
	}
	count := max(it.Count, 1)
	span := last.Sub(*first)
	for i := range count {
		t := *last
		if count > 1 {
			t = first.Add(span * time.Duration(i) / time.Duration(count-1))
		}
		occs = append(occs, kubeOcc{t: t.UTC(), key: key, reason: it.Reason, item: n})
	}
	return occs, nil
}

// containerOf reads the container of a fieldPath such as
// "spec.containers{web}".
func containerOf(fieldPath string) (string, bool) {
	for _, p := range []string{"spec.containers{", "spec.initContainers{", "spec.ephemeralContainers{"} {
		if rest, ok := strings.CutPrefix(fieldPath, p); ok {
			return strings.TrimSuffix(rest, "}"), true
		}
	}
	return "", false
}

// kubeRuns turns the occurrences of events into runs: Started starts one;
// the first BackOff, Killing or Failed after it ends it as a failure (a
// later Started without one ends it too, see Replay); a Failed with no
// run under way is a failed start (the container never ran).
func kubeRuns(occs []kubeOcc) []Record {
	slices.SortStableFunc(occs, func(a, b kubeOcc) int {
		return cmp.Or(a.t.Compare(b.t), strings.Compare(a.key, b.key))
	})
	open := make(map[string]bool)
	var recs []Record
	for _, o := range occs {
		switch {
		case o.reason == "Started":
			recs = append(recs, Record{Time: o.t, Key: o.key, Event: Start, Line: o.item})
			open[o.key] = true
		case open[o.key]:
			code := -1
			if o.reason == "Killing" {
				code = 137
			}
			recs = append(recs, Record{Time: o.t, Key: o.key, Event: Exit, Code: code, Failed: true, Cause: o.reason, Line: o.item})
			delete(open, o.key)
		case o.reason == "Failed":
			recs = append(recs, Record{Time: o.t, Key: o.key, Event: Start, Line: o.item},
				Record{Time: o.t, Key: o.key, Event: Exit, Code: -1, Failed: true, Cause: o.reason, Line: o.item})
		}
	}
	return recs
}

// kubePod adds the runs a Pod's container statuses show: the last one
// that ended (lastState.terminated) and the one under way (state). A Pod
// tells nothing of its earlier runs but their number, restartCount.
func kubePod(it *kubeItem, n int, recs []Record) ([]Record, error) {
	if it.Metadata.Name == "" {
		return recs, errors.New("a Pod without metadata.name")
	}
	for _, c := range it.Status.ContainerStatuses {
		key := it.Metadata.Namespace + "/" + it.Metadata.Name + "/" + c.Name
		for _, st := range []kubeState{c.LastState, c.State} {
			if t := st.Terminated; t != nil {
				if t.StartedAt.IsZero() || t.FinishedAt.IsZero() {
					return recs, fmt.Errorf("container %s: terminated without startedAt or finishedAt", c.Name)
				}
				cause := t.Reason
				if cause == "" {
					cause = exitCause(t.ExitCode)
				}
				recs = append(recs, Record{Time: t.StartedAt.UTC(), Key: key, Event: Start, Line: n},
					Record{Time: t.FinishedAt.UTC(), Key: key, Event: Exit, Code: t.ExitCode, Failed: t.ExitCode != 0 || t.Reason == "OOMKilled",
						Cause: cause, Line: n})
			}
			if r := st.Running; r != nil && !r.StartedAt.IsZero() {
				recs = append(recs, Record{Time: r.StartedAt.UTC(), Key: key, Event: Start, Line: n})
			}
		}
	}
	return recs, nil
}
