//go:build unix

package replay_test

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop/replay"
)

// TestAggregatedCountIsANumber: one event of 300 bytes that says it
// happened 10^12 times is read at once, in little memory: its occurrences
// are placed one per 10s of its span at most after the second (kubelet
// restarts a container at once the first time, no faster than every 10s
// after), and the rest is said, not looped.
func TestAggregatedCountIsANumber(t *testing.T) { // not parallel: it counts the process's allocations
	for _, count := range []string{"1e12", "1000000000000"} {
		ev := `{"kind":"Event","involvedObject":{"namespace":"a","name":"p","fieldPath":"spec.containers{c}"},` +
			`"reason":"Started","message":"Started container c","firstTimestamp":"2024-05-01T10:00:00Z",` +
			`"lastTimestamp":"2024-05-01T10:01:00Z","count":` + count + `}`
		require.Less(t, len(ev), 300)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		recs, r := readAll(t, ev+"\n", replay.FormatAuto)
		el := time.Since(start)
		runtime.ReadMemStats(&after)
		assert.Less(t, el, time.Second, count)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "allocated in all (by every test running), less than 4 MiB")
		require.Len(t, recs, 8, "one start at the first time, one at once, then one per 10s of the 60s")
		assert.Equal(t, at(0), recs[0].Time)
		assert.False(t, recs[0].Inferred)
		assert.Equal(t, at(time.Minute), recs[7].Time)
		assert.False(t, recs[7].Inferred, "the last occurrence is at lastTimestamp")
		for _, rec := range recs[1:7] {
			assert.True(t, rec.Inferred)
		}
		assert.Equal(t, []string{"1", "h:1: item 1: count 1000000000000 over 1m: more than kubelet can make in that span; 8 occurrences replayed"},
			malformed(r))
	}
}

// TestAggregatedSpacingDoubles: the occurrences of a count between its
// first and last time are spaced as kubelet spaces restarts: each gap is
// kubelet's back-off before that restart (none before the first, then 10s
// doubling) and an equal share of the rest of the span; in a span shorter
// than the back-offs, the back-offs scaled down to it.
func TestAggregatedSpacingDoubles(t *testing.T) {
	t.Parallel()
	times := func(reason, message, last string, count int) []time.Duration {
		ev := `{"kind":"Event","involvedObject":{"namespace":"a","name":"p","fieldPath":"spec.containers{c}"},` +
			`"reason":"` + reason + `","message":"` + message + `","firstTimestamp":"2024-05-01T10:00:00Z",` +
			`"lastTimestamp":"` + last + `","count":` + fmt.Sprint(count) + `}`
		recs, r := readAll(t, ev, replay.FormatAuto)
		assert.Equal(t, []string{"0"}, malformed(r))
		var got []time.Duration
		for _, rec := range recs {
			got = append(got, rec.Time.Sub(t0))
		}
		return got
	}
	s := func(ss ...float64) []time.Duration {
		out := make([]time.Duration, len(ss))
		for i, x := range ss {
			out[i] = time.Duration(x * float64(time.Second))
		}
		return out
	}
	// Back-offs 0, 10s, 20s, 40s (70s) in 150s: 20s more in each gap.
	assert.Equal(t, s(0, 20, 50, 90, 150), times("Started", "Started container c", "2024-05-01T10:02:30Z", 5))
	// Back-offs 0, 10s, 20s, 40s in 35s: halved.
	assert.Equal(t, s(0, 0, 5, 15, 35), times("Started", "Started container c", "2024-05-01T10:00:35Z", 5))
}

// kubeListGen generates kubectl get events -o json of n events on the fly:
// a List of which every item is a container's Pulled event (no run).
type kubeListGen struct {
	n, i int
	buf  []byte
	off  int
	peak uint64
}

func (g *kubeListGen) Read(p []byte) (int, error) {
	if g.off == len(g.buf) {
		switch {
		case g.i > g.n:
			return 0, io.EOF
		case g.i == g.n:
			g.buf = append(g.buf[:0], "\n],\"kind\":\"List\",\"metadata\":{}}\n"...)
		default:
			if g.i%4096 == 0 {
				g.peak = max(g.peak, liveHeapBytes())
			}
			g.buf = g.buf[:0]
			if g.i == 0 {
				g.buf = append(g.buf, "{\"apiVersion\":\"v1\",\"items\":[\n"...)
			} else {
				g.buf = append(g.buf, ",\n"...)
			}
			g.buf = fmt.Appendf(g.buf, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"p%d.17","namespace":"a","uid":"u-%d"},`+
				`"involvedObject":{"kind":"Pod","namespace":"a","name":"p%d","uid":"pu-%d","fieldPath":"spec.containers{c}"},`+
				`"reason":"Pulled","message":"Container image \"%s\" already present on machine","count":3,`+
				`"firstTimestamp":"2024-05-01T10:00:00Z","lastTimestamp":"2024-05-01T10:05:00Z","type":"Normal"}`, g.i, g.i, g.i, g.i, strings.Repeat("x", 200))
		}
		g.i++
		g.off = 0
	}
	n := copy(p, g.buf[g.off:])
	g.off += n
	return n, nil
}

// TestKubernetesListInBoundedMemory: a List is read item by item: 200,000
// events (about 100 MB) take no more memory than 20,000 (the live heap the
// collections find while it is read).
func TestKubernetesListInBoundedMemory(t *testing.T) {
	read := func(n int) uint64 {
		runtime.GC()
		g := &kubeListGen{n: n}
		r := replay.NewReader(g, "list", replay.FormatAuto)
		_, err := r.Next()
		require.Equal(t, io.EOF, err, "no run in a list of image pulls")
		assert.Equal(t, replay.FormatKubernetes, r.Format())
		bad, _ := r.Malformed()
		require.Equal(t, 0, bad)
		return g.peak
	}
	small, big := read(20_000), read(200_000)
	t.Logf("peak heap: %d KiB for 20,000 events, %d KiB for 200,000", small>>10, big>>10)
	assert.Less(t, big, small+4<<20, "ten times the events may not take 4 MiB more")
}

// TestBackOffSpreadEvenly: a BackOff's occurrences (kubelet's, at each
// sync of a pod in back-off) are spread evenly over its span, and only
// the first after a start ends that run.
func TestBackOffSpreadEvenly(t *testing.T) {
	t.Parallel()
	ev := func(reason, message, first, last string, count int) string {
		return `{"kind":"Event","involvedObject":{"namespace":"a","name":"p","fieldPath":"spec.containers{c}"},` +
			`"reason":"` + reason + `","message":"` + message + `","firstTimestamp":"2024-05-01T10:00:` + first + `Z",` +
			`"lastTimestamp":"2024-05-01T10:00:` + last + `Z","count":` + fmt.Sprint(count) + `}`
	}
	list := `{"kind":"List","items":[` + ev("Started", "Started container c", "00", "30", 3) + "," +
		ev("BackOff", "Back-off restarting failed container c in pod p", "05", "25", 3) + `]}`
	recs, r := readAll(t, list, replay.FormatAuto)
	assert.Equal(t, []string{"0"}, malformed(r))
	var got []string
	for _, rec := range recs {
		got = append(got, fmt.Sprintf("%s %v", rec.Time.Sub(t0), rec.Event))
	}
	// Starts at 0, 10s (at once, then 10s of back-off, and 10s more in
	// each gap) and 30s; back-offs at 5s, 15s, 25s: the one at 25s comes
	// after the second run ended.
	assert.Equal(t, []string{"0s start", "5s exit", "10s start", "15s exit", "30s start"}, got)
}
