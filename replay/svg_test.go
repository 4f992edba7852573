package replay_test

import (
	"bytes"
	"encoding/xml"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/replay"
)

// fleetSVG replays testdata/fleet.journal.json under the defaults and
// testdata/loose.json and draws it, at most rows keys.
func fleetSVG(t *testing.T, rows int) ([]byte, *replay.Result) {
	t.Helper()
	f, err := os.Open("testdata/fleet.journal.json")
	require.NoError(t, err)
	defer f.Close()
	loose := crashloop.DefaultSupervisorConfig()
	data, err := os.ReadFile("testdata/loose.json")
	require.NoError(t, err)
	require.NoError(t, loose.UnmarshalJSON(data))
	tl := replay.NewTimeline()
	res, err := replay.Replay([]replay.Source{{Name: "fleet", R: f}},
		[]replay.Candidate{{Name: "defaults", Config: crashloop.DefaultSupervisorConfig()}, {Name: "loose", Config: loose}},
		replay.Options{Timeline: tl})
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, tl.WriteSVG(&b, res.Reports, rows))
	return b.Bytes(), res
}

// TestSVGRenders converts the timeline with rsvg-convert (Debian's
// librsvg2-bin, which test.sh installs) and checks that the picture is
// not blank: the failures' red, the parks' orange and the breaker's blue
// are all in it.
func TestSVGRenders(t *testing.T) {
	t.Parallel()
	svg, res := fleetSVG(t, 5)
	assert.Equal(t, 3, res.Reports[0].Totals.FleetTrips)
	var reasons []string
	for _, tr := range res.Reports[0].Trips {
		reasons = append(reasons, tr.Reason)
	}
	assert.Equal(t, []string{crashloop.ReasonFleetFailingFraction, crashloop.ReasonFleetFailingFraction,
		crashloop.ReasonFleetFailingFraction}, reasons, "each trip's reason is its code")

	dec := xml.NewDecoder(bytes.NewReader(svg))
	elems := map[string]int{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is well-formed XML")
		if se, ok := tok.(xml.StartElement); ok {
			elems[se.Name.Local]++
		}
	}
	assert.Equal(t, 1, elems["svg"])
	assert.Contains(t, string(svg), "13 keys; the 5 busiest shown")
	assert.Equal(t, 2*5, strings.Count(string(svg), `text-anchor="end"`), "5 rows of names in each of 2 panels")

	bin, err := exec.LookPath("rsvg-convert")
	require.NoError(t, err, "rsvg-convert is missing: run ./test.sh, which installs librsvg2-bin")
	dir := t.TempDir()
	in, out := filepath.Join(dir, "t.svg"), filepath.Join(dir, "t.png")
	require.NoError(t, os.WriteFile(in, svg, 0o644))
	msg, err := exec.Command(bin, "-o", out, in).CombinedOutput()
	require.NoError(t, err, string(msg))
	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, 1000, 40+2*(34+5*14+10)+10), img.Bounds())
	near := func(c color.Color, r, g, b int) bool {
		cr, cg, cb, _ := c.RGBA()
		d := func(x uint32, y int) bool { return int(x>>8) >= y-40 && int(x>>8) <= y+40 }
		return d(cr, r) && d(cg, g) && d(cb, b)
	}
	var red, orange, blue, white int
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			c := img.At(x, y)
			switch {
			case near(c, 0xdc, 0x26, 0x26):
				red++
			case near(c, 0xf8, 0xc6, 0x80): // orange at 45% over the panel's grey
				orange++
			case near(c, 0xc6, 0xd7, 0xf6): // blue at 25%
				blue++
			case near(c, 0xff, 0xff, 0xff):
				white++
			}
		}
	}
	assert.Greater(t, red, 50, "failures are drawn")
	assert.Greater(t, orange, 5000, "parks are shaded")
	assert.Greater(t, blue, 200, "the fleet trips are bands")
	assert.Less(t, white, 1000*img.Bounds().Dy(), "not blank")
}

// TestDocsSVG: docs/replay-timeline.svg is what the command documented in
// docs/replay.md makes from the test data.
func TestDocsSVG(t *testing.T) {
	t.Parallel()
	svg, _ := fleetSVG(t, 40)
	doc, err := os.ReadFile("../docs/replay-timeline.svg")
	require.NoError(t, err)
	assert.Equal(t, string(svg), string(doc), "regenerate with the command in docs/replay.md")
}
