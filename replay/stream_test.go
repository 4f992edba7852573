//go:build unix

package replay_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

// journalGen generates a journalctl -o json history of n entries on the
// fly, never holding it: units cycle through systemd's four messages
// (started, process exited, failed, restart scheduled) one unit after
// another, 1 to 19ms apart. Every entry carries the fields journalctl
// writes for systemd's messages.
type journalGen struct {
	n, i  int
	units int
	buf   []byte
	off   int
	t     int64 // microseconds
	peak  uint64
	reads int
}

func newJournalGen(n, units int) *journalGen {
	return &journalGen{n: n, units: units, t: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixMicro()}
}

var journalMsgs = [4]string{started, exited, failed, schedule}

func (g *journalGen) Read(p []byte) (int, error) {
	if g.off == len(g.buf) {
		if g.i >= g.n {
			return 0, io.EOF
		}
		g.reads++
		if g.reads%64 == 0 {
			g.peak = max(g.peak, heapBytes())
		}
		g.buf, g.off = g.buf[:0], 0
		for range 256 {
			if g.i >= g.n {
				break
			}
			g.line()
		}
	}
	n := copy(p, g.buf[g.off:])
	g.off += n
	return n, nil
}

// line appends the next entry: entry i is message i%4 of unit (i/4)%units.
func (g *journalGen) line() {
	cycle, msg := g.i/4, g.i%4
	unit := cycle % g.units
	g.t += 1000 + int64(g.i%7)*3000 // 1ms to 19ms between entries
	b := g.buf
	b = append(b, `{"__CURSOR":"s=9b1c8a2f;i=`...)
	b = strconv.AppendInt(b, int64(g.i), 16)
	b = append(b, `;b=6f5e4d3c;m=`...)
	b = strconv.AppendInt(b, g.t, 16)
	b = append(b, `","__REALTIME_TIMESTAMP":"`...)
	b = strconv.AppendInt(b, g.t, 10)
	b = append(b, `","__MONOTONIC_TIMESTAMP":"`...)
	b = strconv.AppendInt(b, g.t/7, 10)
	b = append(b, `","_BOOT_ID":"6f5e4d3c2b1a09887766554433221100","PRIORITY":"6","SYSLOG_FACILITY":"3","SYSLOG_IDENTIFIER":"systemd","_PID":"1","_UID":"0","_GID":"0","_COMM":"systemd","_EXE":"/usr/lib/systemd/systemd","_CMDLINE":"/sbin/init","_TRANSPORT":"journal","_HOSTNAME":"node-7","CODE_FILE":"src/core/unit.c","CODE_LINE":"5800","CODE_FUNC":"unit_log_success","MESSAGE_ID":"`...)
	b = append(b, journalMsgs[msg]...)
	b = append(b, `","UNIT":"worker-`...)
	b = strconv.AppendInt(b, int64(unit), 10)
	b = append(b, `.service","INVOCATION_ID":"0123456789abcdef`...) // one per run, as systemd gives each
	for sh := 60; sh >= 0; sh -= 4 {
		b = append(b, "0123456789abcdef"[(cycle>>sh)&15])
	}
	b = append(b, `","MESSAGE":"worker.service: message"`...)
	switch msg {
	case 1:
		b = append(b, `,"EXIT_CODE":"exited","EXIT_STATUS":"1"`...)
	case 2:
		b = append(b, `,"UNIT_RESULT":"exit-code"`...)
	case 3:
		b = append(b, `,"N_RESTARTS":"`...)
		b = strconv.AppendInt(b, int64(cycle/g.units), 10)
		b = append(b, '"')
	}
	b = append(b, "}\n"...)
	g.buf = b
	g.i++
}

// heapBytes is the heap's live and not yet swept objects now.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// liveHeapBytes is the heap the last garbage collection found live: what a
// reader holds, whatever the collector's pace on a busy machine (between
// collections the heap also holds the garbage not yet collected, as much
// as the collector lets grow).
func liveHeapBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// replayJournal replays n generated entries of units under the defaults
// and returns the records judged and the peak heap seen while reading.
func replayJournal(tb testing.TB, n, units int) (int, uint64) {
	g := newJournalGen(n, units)
	res, err := replay.Replay([]replay.Source{{Name: "gen", R: g}}, []replay.Candidate{{Config: crashloop.DefaultSupervisorConfig()}}, replay.Options{})
	require.NoError(tb, err)
	return res.Sources[0].Records, g.peak
}

// TestReplayStreamsInBoundedMemory: state per key, not per record: ten
// times the history of the same keys takes no more memory.
func TestReplayStreamsInBoundedMemory(t *testing.T) {
	runtime.GC()
	base := heapBytes()
	recs, peakSmall := replayJournal(t, 20_000, 500)
	assert.Equal(t, 10_000, recs, "a start and an exit in every four entries")
	runtime.GC()
	recs, peakBig := replayJournal(t, 200_000, 500)
	assert.Equal(t, 100_000, recs)
	t.Logf("peak heap above the start: %d KiB for 20k entries, %d KiB for 200k", (peakSmall-min(base, peakSmall))>>10, (peakBig-min(base, peakBig))>>10)
	assert.Less(t, peakBig, peakSmall+8<<20, "ten times the records may not take 8 MiB more (a record's state would be 40 bytes at most)")
}

// BenchmarkReplayJournald replays a generated history of 1,000,000
// journald entries (500,000 records: a start and an exit in every four
// entries) of 1,000 units under the defaults, and reports entries and
// records a second (of wall time, and of the process's CPU time: the
// generator's share included) and the peak heap. Run it on one core:
//
//	go test -run '^$' -bench 'Journald' -benchtime 1x -cpu 1 ./replay
func BenchmarkReplayJournald(b *testing.B) {
	const n = 1_000_000
	for b.Loop() {
		runtime.GC()
		start, cpu := time.Now(), cpuTime()
		recs, peak := replayJournal(b, n, 1000)
		el, used := time.Since(start).Seconds(), (cpuTime() - cpu).Seconds()
		b.ReportMetric(float64(n)/el, "entries/s")
		b.ReportMetric(float64(n)/used, "entries/cpu-s")
		b.ReportMetric(float64(recs)/used, "records/cpu-s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	}
}

// journalAll is every field of the generated entries, for a decoding with
// encoding/json alone.
type journalAll map[string]string

// BenchmarkJSONDecodeJournald decodes the same 1,000,000 generated
// entries with encoding/json alone (each line into a map of its fields,
// as a program reading journalctl -o json would), doing nothing with
// them: the floor a reader that decodes every line stands on.
func BenchmarkJSONDecodeJournald(b *testing.B) {
	const n = 1_000_000
	for b.Loop() {
		start, cpu := time.Now(), cpuTime()
		sc := bufio.NewScanner(newJournalGen(n, 1000))
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		lines := 0
		for sc.Scan() {
			var e journalAll
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				b.Fatal(err)
			}
			lines++
		}
		if lines != n {
			b.Fatal(fmt.Sprint(lines, " lines"))
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "entries/s")
		b.ReportMetric(float64(n)/(cpuTime()-cpu).Seconds(), "entries/cpu-s")
	}
}

// cpuTime is the CPU time the process has used, user and system: on a
// machine shared with other work, a rate per CPU second says what one
// core does, where a rate per wall second says how busy the others were.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
