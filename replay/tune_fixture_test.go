package replay

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateTune = flag.Bool("update-tune", false, "rewrite testdata/tune.csv from its generator")

// tuneFixture is the history of docs/tune.md, testdata/tune.csv: three
// days of 12 keys (three real crash loops, one of them fixed by an
// operator after 30 hours; two slow loops; four keys of a dependency that
// is down now and then; three steady keys).
var tuneFixture = genConfig{Seed: 1, Start: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), Span: 72 * time.Hour, Fast: 3, Slow: 2, Outage: 4, Steady: 3}

// TestTuneFixtureIsGenerated: testdata/tune.csv is what its generator
// writes (go test ./replay -run TestTuneFixtureIsGenerated -args -update-tune
// rewrites it).
func TestTuneFixtureIsGenerated(t *testing.T) {
	t.Parallel()
	data, _ := genHistory(tuneFixture)
	if *updateTune {
		require.NoError(t, os.WriteFile("testdata/tune.csv", data, 0o644))
	}
	file, err := os.ReadFile("testdata/tune.csv")
	require.NoError(t, err)
	assert.Equal(t, string(data), string(file), "regenerate with go test ./replay -run TestTuneFixtureIsGenerated -args -update-tune")
}
