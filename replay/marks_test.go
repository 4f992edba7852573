package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestTimelineMarksCoarsen: a key keeps at most 2,048 marks of a kind;
// past that their resolution halves, and the failures that come to share a
// mark are counted in its note, none lost, the last one's status kept.
func TestTimelineMarksCoarsen(t *testing.T) {
	t.Parallel()
	var m marks
	const n = 100_000
	for i := range n {
		m.add(time.Duration(i)*time.Second, true, i%256, "exited")
	}
	assert.LessOrEqual(t, len(m.buckets), maxMarks)
	assert.Greater(t, len(m.buckets), maxMarks/2, "halved only as often as needed")
	assert.Equal(t, 65536*time.Millisecond, m.q, "1ms doubled (16 times) until 100,000s fit in 2,048 marks")
	total := 0
	for _, nt := range m.notes {
		total += nt.n
	}
	assert.Equal(t, n, total)
	last := m.notes[len(m.notes)-1]
	assert.Equal(t, (n-1)%256, last.code)
}

// TestJournaldSkipsOtherLinesAtAGlance: a line whose MESSAGE_ID is none of
// systemd's messages about a unit's life (a unit's own output) is skipped
// without decoding: no allocation, no record.
func TestJournaldSkipsOtherLinesAtAGlance(t *testing.T) {
	j := newJournald()
	line := []byte(`{"__CURSOR":"s=1;i=2","__REALTIME_TIMESTAMP":"1714557600500000","_SYSTEMD_UNIT":"api.service","MESSAGE_ID":"f77379a8490b408bbe5f6940505a777b","MESSAGE":"listening on :8080","CODE_FUNC":"main"}`)
	var out []Record
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() {
		if err := j.line(line, 1, &out); err != nil {
			panic(err)
		}
	}))
	assert.Empty(t, out)
}
