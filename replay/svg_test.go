package replay_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
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

// drawCSV replays a plain CSV history under the defaults and draws it.
func drawCSV(t *testing.T, history string) string {
	t.Helper()
	tl := replay.NewTimeline()
	res, err := replay.Replay([]replay.Source{{Name: "h", R: strings.NewReader(history)}},
		[]replay.Candidate{{Name: "defaults", Config: crashloop.DefaultSupervisorConfig()}}, replay.Options{Timeline: tl})
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, tl.WriteSVG(&b, res.Reports, 40))
	return b.String()
}

// TestSVGLabelsTitlesAndLegend: a long key is named whole (the picture
// widens for it); each failure says when, its cause and its exit status,
// each park its reason, in a <title>; the legend counts starts and
// failures, each panel its parks, needs-human and trips.
func TestSVGLabelsTitlesAndLegend(t *testing.T) {
	t.Parallel()
	long := "payments-prod/checkout-api-7d9f8b6c5d-x2x4q/checkout-api (pod 9b2d7c11)"
	var h strings.Builder
	for i := range 4 { // four crashes within a second apart: the budget parks
		fmt.Fprintf(&h, "%d,%s,start\n%d.5,%s,exit,3\n", 1714557600+i, long, 1714557600+i, long)
	}
	fmt.Fprintf(&h, "1714557610,short,start\n1714557611,short,exit,137\n")
	svg := drawCSV(t, h.String())
	assert.Contains(t, svg, `text-anchor="end">`+long+`</text>`, "the whole name")
	assert.NotContains(t, svg, "…")
	assert.Contains(t, svg, `<svg xmlns="http://www.w3.org/2000/svg" width="1290" `, "wider for the name: 72 characters at 6.6px and 12px")
	assert.Contains(t, svg, "<title>"+long+", 2024-05-01T10:00:00.5Z: exited with status 3</title>")
	assert.Contains(t, svg, "<title>short, 2024-05-01T10:00:11Z: killed by signal KILL (exit status 137)</title>")
	assert.Contains(t, svg, "<title>"+long+": parked (respawn_budget_exhausted) from 2024-05-01T10:00:03.5Z to 2024-05-01T10:00:11Z</title>")
	assert.Contains(t, svg, ">grey: start (5) · red: failure (5) · orange: parked")
	assert.Contains(t, svg, ">defaults: 1 park · 0 needs-human · 0 fleet trips</text>")
}

// TestSVGAxisNeverOverlaps: over an hour, a month and three years, the
// axis labels are distinct and each pair is further apart than their
// widths.
func TestSVGAxisNeverOverlaps(t *testing.T) {
	t.Parallel()
	for _, span := range []int64{3600, 30 * 86400, 3 * 365 * 86400} {
		svg := drawCSV(t, fmt.Sprintf("1714557600,a,start\n%d,a,exit,1\n", 1714557600+span))
		type label struct {
			x    float64
			text string
		}
		var labels []label
		dec := xml.NewDecoder(strings.NewReader(svg))
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			se, ok := tok.(xml.StartElement)
			if !ok || se.Name.Local != "text" {
				continue
			}
			var x float64
			middle := false
			for _, a := range se.Attr {
				switch a.Name.Local {
				case "x":
					_, err := fmt.Sscan(a.Value, &x)
					require.NoError(t, err)
				case "text-anchor":
					middle = a.Value == "middle"
				}
			}
			if middle {
				var text string
				require.NoError(t, dec.DecodeElement(&text, &se))
				labels = append(labels, label{x, text})
			}
		}
		require.GreaterOrEqual(t, len(labels), 3, "span %ds: %v", span, labels)
		seen := map[string]bool{}
		for i, l := range labels {
			assert.False(t, seen[l.text], "span %ds: %q twice", span, l.text)
			seen[l.text] = true
			if i > 0 {
				p := labels[i-1]
				assert.Greater(t, l.x-p.x, float64(len(p.text)+len(l.text))*6.6/2, "span %ds: %q and %q overlap", span, p.text, l.text)
			}
		}
	}
}

// TestSVGRowsDefaultTo40: with rows < 1 (the command's --svg-rows is 40 by
// default) the timeline shows the 40 busiest keys and says how many there
// were.
func TestSVGRowsDefaultTo40(t *testing.T) {
	t.Parallel()
	var h strings.Builder
	for i := range 41 {
		fmt.Fprintf(&h, "%d,k%02d,start\n", 1714557600+i, i)
	}
	tl := replay.NewTimeline()
	res, err := replay.Replay([]replay.Source{{Name: "h", R: strings.NewReader(h.String())}},
		[]replay.Candidate{{Name: "defaults", Config: crashloop.DefaultSupervisorConfig()}}, replay.Options{Timeline: tl})
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, tl.WriteSVG(&b, res.Reports, 0))
	assert.Contains(t, b.String(), "41 keys; the 40 busiest shown")
	assert.Equal(t, 40, strings.Count(b.String(), `text-anchor="end">k`))
}
