package replay

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// kubeItem is the part of a Kubernetes Event (core/v1, or events.k8s.io/v1
// in its own names: see events) or Pod that replay reads.
type kubeItem struct {
	Kind           string   `json:"kind"`
	InvolvedObject *kubeRef `json:"involvedObject"`
	Regarding      *kubeRef `json:"regarding"` // events.k8s.io/v1's involvedObject
	Reason         string   `json:"reason"`
	Message        string   `json:"message"`
	Note           string   `json:"note"` // events.k8s.io/v1's message
	// FirstTimestamp and LastTimestamp are core/v1's;
	// events.k8s.io/v1 names them deprecatedFirstTimestamp and
	// deprecatedLastTimestamp, and its own recorders leave them out for
	// eventTime and series.lastObservedTime.
	FirstTimestamp           *time.Time `json:"firstTimestamp"`
	LastTimestamp            *time.Time `json:"lastTimestamp"`
	DeprecatedFirstTimestamp *time.Time `json:"deprecatedFirstTimestamp"`
	DeprecatedLastTimestamp  *time.Time `json:"deprecatedLastTimestamp"`
	EventTime                *time.Time `json:"eventTime"`
	// Count is core/v1's (events.k8s.io/v1: deprecatedCount, or
	// series.count): a number, never a loop: see kubeSpan.
	Count           float64 `json:"count"`
	DeprecatedCount float64 `json:"deprecatedCount"`
	Series          *struct {
		Count            float64    `json:"count"`
		LastObservedTime *time.Time `json:"lastObservedTime"`
	} `json:"series"`
	Metadata struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		UID       string `json:"uid"`
	} `json:"metadata"`
	Status *struct {
		InitContainerStatuses []kubeContainer `json:"initContainerStatuses"`
		ContainerStatuses     []kubeContainer `json:"containerStatuses"`
	} `json:"status"`
}

// kubeRef is the object an Event is about.
type kubeRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	FieldPath string `json:"fieldPath"`
}

// events gives an events.k8s.io/v1 Event core/v1's names, as the API
// server converts one to the other (regarding is involvedObject, note
// message, deprecatedCount count, deprecatedFirstTimestamp and
// deprecatedLastTimestamp firstTimestamp and lastTimestamp); an event of
// its own recorders, without those, counts series.count times from
// eventTime to series.lastObservedTime.
func (it *kubeItem) events() {
	if it.InvolvedObject != nil || it.Regarding == nil {
		return
	}
	it.InvolvedObject, it.Message = it.Regarding, it.Note
	it.FirstTimestamp, it.LastTimestamp, it.Count = it.DeprecatedFirstTimestamp, it.DeprecatedLastTimestamp, it.DeprecatedCount
	if s := it.Series; s != nil && it.Count == 0 {
		it.Count, it.LastTimestamp = s.Count, s.LastObservedTime
	}
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

// The limits of a Kubernetes history: the occurrences of events it keeps
// to put them in time order (the API lists events by name, not time), and
// the occurrences one aggregated event may stand for.
const (
	maxKubeOccs  = 500_000
	maxEventOccs = 10_000
	// kubeMinGap is the shortest time between two restarts of a
	// container by kubelet after its first, which is at once (its back-off
	// starts at 10s): an event of runs counted more often than that over
	// its span is not replayed beyond it.
	kubeMinGap = 10 * time.Second
	// kubeMinSyncGap bounds BackOff events: kubelet logs one at each sync
	// of a pod whose container is in back-off, not one per restart (and
	// client-go's event spam filter lets 25 through, then one per 5
	// minutes); more than one a second over the span is not replayed.
	kubeMinSyncGap = time.Second
)

// kubeReader reads Kubernetes JSON: Lists (kubectl get events/pods -o
// json), single objects (kubectl get pod NAME -o json) and streams of
// objects (a kube event exporter's log), item by item with a streaming
// decoder, so an item is held only while it is read. Events are aggregated
// (an event with count N happened N times from firstTimestamp to
// lastTimestamp) and not in time order, so their occurrences are kept
// (at most maxKubeOccs) and sorted at the end.
type kubeReader struct {
	src   io.Reader
	first int // the line the document starts on
	done  bool
	occs  []kubeOcc
	recs  []Record
	seen  map[string]kubeSeen // an event's metadata.uid: what earlier copies of it counted
	uids  map[string]string   // namespace/name: the uid of the first pod instance seen
	full  bool
}

// kubeSeen is what the copies of one event read before counted, and when
// the last of them was.
type kubeSeen struct {
	count int
	last  time.Time
}

func newKubeReader(src io.Reader, line int) *kubeReader {
	return &kubeReader{src: src, first: line, seen: make(map[string]kubeSeen), uids: make(map[string]string)}
}

// kubeOcc is one occurrence of an event of a key.
type kubeOcc struct {
	t        time.Time
	key      string
	reason   string
	end      string // what it says of the run: "start", "failure" (probe kill, back-off, failed start) or "stop"
	item     int
	inferred bool
}

// next reads the whole history into r.pending, sorted by time.
func (k *kubeReader) next(r *Reader) {
	if k.done {
		r.finish(io.EOF)
		return
	}
	k.done = true
	dec := json.NewDecoder(newKlogFilter(k.src, k.first, func(line int) { r.malformed(line, errKlog) }))
	n := 0
	for {
		if t, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil || t != json.Delim('{') {
			r.malformed(max(n, k.first), fmt.Errorf("after item %d: not a Kubernetes object (kubectl get events or pods -o json): %v (the rest is not read)", n, cmp.Or[any](err, t)))
			break
		}
		if err := k.value(r, dec, &n); err != nil {
			r.malformed(max(n, k.first), fmt.Errorf("item %d: %v (the rest is not read)", n, err))
			break
		}
	}
	recs := append(k.recs, kubeRuns(k.occs)...)
	slices.SortStableFunc(recs, func(a, b Record) int { return a.Time.Compare(b.Time) })
	r.pending = append(r.pending, recs...)
	k.occs, k.recs = nil, nil
	if len(r.pending) == 0 {
		r.finish(io.EOF)
	}
}

// value reads one top-level object, whose '{' was read: a List, whose
// items it reads one by one, or an Event or a Pod.
func (k *kubeReader) value(r *Reader, dec *json.Decoder, n *int) error {
	fields := make(map[string]json.RawMessage)
	size, list := 0, false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		if name == "items" {
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return errors.New(`"items" is not an array`)
			}
			list = true
			for dec.More() {
				*n++
				var it kubeItem
				var te *json.UnmarshalTypeError
				if err := dec.Decode(&it); errors.As(err, &te) {
					r.malformed(*n, fmt.Errorf("item %d: %v", *n, err)) // the item was read: the next one can be
					continue
				} else if err != nil {
					return err
				}
				k.item(r, &it, *n)
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			continue
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if size += len(v); size > maxLine {
			return fmt.Errorf("an object longer than %d bytes", maxLine)
		}
		if !list {
			fields[name] = v
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return err
	}
	if list {
		return nil
	}
	// One object: an Event or a Pod.
	*n++
	b, _ := json.Marshal(fields)
	var it kubeItem
	if err := json.Unmarshal(b, &it); err != nil {
		r.malformed(*n, fmt.Errorf("item %d: %v", *n, err))
		return nil
	}
	k.item(r, &it, *n)
	return nil
}

// item reads one Event or Pod.
func (k *kubeReader) item(r *Reader, it *kubeItem, n int) {
	var err error
	it.events()
	switch {
	case it.InvolvedObject != nil:
		err = k.event(r, it, n)
	case it.Status != nil:
		err = k.pod(it, n)
	default:
		err = errors.New("neither an Event (involvedObject, regarding) nor a Pod (status)")
	}
	if err != nil {
		r.malformed(n, fmt.Errorf("item %d: %v", n, err))
	}
}

// instance returns the key of a pod's container: namespace/name/container,
// with the pod's uid when an earlier instance of that name had another.
func (k *kubeReader) instance(ns, name, uid, container string) string {
	pod := ns + "/" + name
	key := pod + "/" + container
	if uid == "" {
		return key
	}
	if first, ok := k.uids[pod]; !ok {
		if len(k.uids) < maxKubeOccs {
			k.uids[pod] = uid
		}
	} else if first != uid {
		key += " (pod " + uid[:min(len(uid), 8)] + ")"
	}
	return key
}

// runEnd tells what an event of a container says of its run: "start",
// "failure" (a probe kill, a back-off after a failed run, a failed start),
// "stop" (an operator's: a pod deleted), or "" (nothing: image pulls,
// other reasons).
func runEnd(reason, message string) string {
	switch reason {
	case "Started":
		return "start"
	case "Killing":
		if strings.Contains(message, "probe") { // "failed liveness probe, will be restarted", startup probe
			return "failure"
		}
		return "stop" // "Stopping container X": the pod is deleted or evicted
	case "BackOff":
		if strings.Contains(message, "restarting failed container") {
			return "failure"
		}
	case "Failed":
		if !strings.Contains(message, "pull") && !strings.Contains(message, "Pull") &&
			!strings.Contains(message, "InvalidImageName") && !strings.Contains(message, "ErrImageNeverPull") {
			return "failure" // "Error: failed to create containerd task...": a start that failed
		}
	}
	return ""
}

// event adds the occurrences of an Event.
func (k *kubeReader) event(r *Reader, it *kubeItem, n int) error {
	end := runEnd(it.Reason, it.Message)
	if end == "" {
		return nil
	}
	o := it.InvolvedObject
	if o.Name == "" {
		return errors.New("involvedObject without a name")
	}
	c, ok := containerOf(o.FieldPath)
	if !ok {
		return nil // an event of the pod, not of a container
	}
	key := k.instance(o.Namespace, o.Name, o.UID, c)
	first, last := it.FirstTimestamp, it.LastTimestamp
	if first == nil {
		first = it.EventTime
	}
	if last == nil {
		last = first
	}
	if first == nil {
		return errors.New("no firstTimestamp, lastTimestamp or eventTime")
	}
	count := 1
	if c := it.Count; c > 1 && !math.IsNaN(c) {
		count = int(min(c, 1e15))
	}
	// A copy of an event read before (a kube event exporter logs every
	// update of it): only the occurrences it adds are new.
	base, from := first.UTC(), 0
	if id := it.Metadata.UID; id != "" {
		if s, ok := k.seen[id]; ok {
			if count <= s.count {
				return nil
			}
			base, from = s.last, s.count
		}
		if len(k.seen) < maxKubeOccs {
			k.seen[id] = kubeSeen{count: count, last: last.UTC()}
		}
	}
	if k.full {
		return nil
	}
	gap := kubeMinGap
	if it.Reason == "BackOff" {
		gap = kubeMinSyncGap
	}
	_, err := kubeSpan(base, last.UTC(), from, count, gap, func(t time.Time, inferred bool) bool {
		if len(k.occs) >= maxKubeOccs {
			k.full = true
			return false
		}
		k.occs = append(k.occs, kubeOcc{t: t, key: key, reason: it.Reason, end: end, item: n, inferred: inferred})
		return true
	})
	if k.full {
		r.malformed(n, fmt.Errorf("item %d: more than %d occurrences of events: the rest are not replayed", n, maxKubeOccs))
	}
	return err
}

// kubeSpan calls add for the occurrences from+1 to count of an event whose
// occurrence from (or, when from is 0, its first) was at base and whose
// last was at last; the times between the ends are inferred. An event of
// runs (gap kubeMinGap) is placed as kubelet spaces a container's
// restarts: each gap is kubelet's back-off before that restart (none
// before the first, then 10s doubling to 300s) and an equal share of what
// the span holds beyond the back-offs (the runs, the image pulls); in a
// span shorter than the back-offs, the back-offs scaled down to it. A
// BackOff (kubelet's, at each sync of a pod in back-off) is spread evenly.
// A count is a number: more occurrences than the span can hold (one per
// gap, and for runs the second occurrence at once) or than maxEventOccs
// are not placed (one at least, at last), and an error says how many
// were.
func kubeSpan(base, last time.Time, from, count int, gap time.Duration, add func(t time.Time, inferred bool) bool) (int, error) {
	if last.Before(base) {
		last = base
	}
	span := last.Sub(base)
	first := 0
	if from == 0 {
		if !add(base, false) {
			return 0, nil
		}
		from, first = 1, 1
	}
	want := count - from
	if want <= 0 {
		return first, nil
	}
	runs := gap == kubeMinGap
	can := int(span / gap)
	if runs && from == 1 {
		can++ // kubelet's first restart is at once
	}
	n := min(want, maxEventOccs-first, max(can, 1))
	// backoff is kubelet's back-off before occurrence j (from 1) of a
	// container's restarts.
	backoff := func(j int) float64 {
		if !runs || j <= 1 {
			return 0
		}
		return float64(min(kubeMinGap<<min(j-2, 10), 300*time.Second))
	}
	total := 0.0
	for i := range n {
		total += backoff(from + i)
	}
	share, scale := 0.0, 1.0
	if rest := float64(span) - total; rest >= 0 {
		share = rest / float64(n)
	} else {
		scale = float64(span) / total
	}
	sum := 0.0
	for i := range n {
		sum += backoff(from+i)*scale + share
		t := base.Add(time.Duration(sum))
		if i == n-1 {
			t = last
		}
		if !add(t, i < n-1) {
			break
		}
	}
	if n < want {
		return first + n, fmt.Errorf("count %d over %s: more than kubelet can make in that span; %d occurrences replayed", count,
			Duration(span), first+n)
	}
	return first + n, nil
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
// the first failure after it (a probe kill, a back-off) ends it as a
// failure, and an operator's Killing as a stop (a later Started without
// either ends it too, see Replay); a failed start with no run under way
// is a run that failed at once.
func kubeRuns(occs []kubeOcc) []Record {
	slices.SortStableFunc(occs, func(a, b kubeOcc) int {
		return cmp.Or(a.t.Compare(b.t), strings.Compare(a.key, b.key))
	})
	open := make(map[string]bool)
	var recs []Record
	for _, o := range occs {
		switch {
		case o.end == "start":
			recs = append(recs, Record{Time: o.t, Key: o.key, Event: Start, Line: o.item, Inferred: o.inferred})
			open[o.key] = true
		case open[o.key] && o.end == "stop":
			recs = append(recs, Record{Time: o.t, Key: o.key, Event: Stop, Code: -1, Cause: "stopped (the pod was deleted)",
				Line: o.item, Inferred: o.inferred})
			delete(open, o.key)
		case open[o.key]:
			code, cause := -1, "back-off after a failed run"
			switch o.reason {
			case "Killing":
				code, cause = 137, "killed: failed its probe"
			case "Failed":
				cause = "failed to start"
			}
			recs = append(recs, Record{Time: o.t, Key: o.key, Event: Exit, Code: code, Failed: true, Cause: cause, Line: o.item,
				Inferred: o.inferred})
			delete(open, o.key)
		case o.reason == "Failed":
			recs = append(recs, Record{Time: o.t, Key: o.key, Event: Start, Line: o.item, Inferred: o.inferred},
				Record{Time: o.t, Key: o.key, Event: Exit, Code: -1, Failed: true, Cause: "failed to start", Line: o.item, Inferred: o.inferred})
		}
	}
	return recs
}

// pod adds the runs a Pod's container statuses (init containers' too)
// show: the last one that ended (lastState.terminated) and the one under
// way or ended (state). A Pod tells nothing of its earlier runs but their
// number, restartCount, which every record of the container carries
// (Record.Counted).
func (k *kubeReader) pod(it *kubeItem, n int) error {
	if it.Metadata.Name == "" {
		return errors.New("a Pod without metadata.name")
	}
	for _, c := range slices.Concat(it.Status.InitContainerStatuses, it.Status.ContainerStatuses) {
		key := k.instance(it.Metadata.Namespace, it.Metadata.Name, it.Metadata.UID, c.Name)
		for _, st := range []kubeState{c.LastState, c.State} {
			if t := st.Terminated; t != nil {
				if t.StartedAt.IsZero() || t.FinishedAt.IsZero() {
					return fmt.Errorf("container %s: terminated without startedAt or finishedAt", c.Name)
				}
				cause := exitCause(t.ExitCode)
				if t.Reason != "" {
					cause = t.Reason + ", " + cause
				}
				k.recs = append(k.recs, Record{Time: t.StartedAt.UTC(), Key: key, Event: Start, Line: n, Counted: c.RestartCount},
					Record{Time: t.FinishedAt.UTC(), Key: key, Event: Exit, Code: t.ExitCode, Failed: t.ExitCode != 0 || t.Reason == "OOMKilled",
						Cause: cause, Line: n, Counted: c.RestartCount})
			}
			if r := st.Running; r != nil && !r.StartedAt.IsZero() {
				k.recs = append(k.recs, Record{Time: r.StartedAt.UTC(), Key: key, Event: Start, Line: n, Counted: c.RestartCount})
			}
		}
	}
	if len(k.recs) > maxKubeOccs {
		return fmt.Errorf("more than %d records of pods", maxKubeOccs)
	}
	return nil
}
