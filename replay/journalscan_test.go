package replay

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fieldsOf is every field of a rawEntry as strings, for comparing.
func fieldsOf(e *rawEntry) []string {
	return []string{string(e.MessageID), string(e.Unit), string(e.UserUnit), string(e.Realtime), string(e.ExitCode),
		string(e.ExitStatus), string(e.UnitResult), string(e.CodeFunc), string(e.UID), string(e.Message),
		string(e.Invocation), string(e.UserInvocation)}
}

// viaJSON is what encoding/json reads of the entry b, and its error.
func viaJSON(b []byte) ([]string, error) {
	var j journalEntry
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, err
	}
	return []string{string(j.MessageID), string(j.Unit), string(j.UserUnit), string(j.Realtime), string(j.ExitCode),
		string(j.ExitStatus), string(j.UnitResult), string(j.CodeFunc), string(j.UID), string(j.Message),
		string(j.Invocation), string(j.UserInvocation)}, nil
}

// checkScan holds scanEntry to encoding/json on b: what the scan accepts
// is valid JSON and reads as encoding/json reads it (MESSAGE but when the
// scan marked it raw), and decodeEntry fails exactly where encoding/json
// does.
func checkScan(t *testing.T, b []byte) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return
	}
	want, jerr := viaJSON(b)
	var e rawEntry
	if scanEntry(b, &e) {
		require.True(t, json.Valid(b), "scanEntry accepted invalid JSON %q", b)
		require.NoError(t, jerr)
		got := fieldsOf(&e)
		if e.messageRaw {
			got[9], want[9] = "", ""
		}
		require.Equal(t, want, got, "%q", b)
	}
	var d rawEntry
	err := decodeEntry(b, &d)
	require.Equal(t, jerr != nil, err != nil, "%q: decodeEntry %v, encoding/json %v", b, err, jerr)
	if err == nil {
		want, _ := viaJSON(b)
		got := fieldsOf(&d)
		if d.messageRaw && !d.needsMessage() {
			got[9], want[9] = "", "" // MESSAGE is not read for such an entry
		}
		require.Equal(t, want, got, "%q", b)
	}
}

// scanSeeds are entries as journalctl writes them (the real ones of
// testdata) and the forms a scan must leave to encoding/json.
func scanSeeds(t testing.TB) [][]byte {
	seeds := []string{
		`{}`, `{ }`, `{"MESSAGE_ID":"98e322203f7a4ed290d09fe03c09fe15","UNIT":"a.service","EXIT_CODE":"exited","EXIT_STATUS":"3","__REALTIME_TIMESTAMP":"1714557601000000"}`,
		`{"MESSAGE":[104,105],"UNIT":"a.service"}`,
		`{"UNIT":["a.service","b.service"]}`,
		`{"UNIT":null}`,
		`{"unit":"lower.service"}`,
		`{"Unit":"mixed.service","UNIT":"upper.service"}`,
		`{"UNIT":"a.service","UNIT":"b.service"}`,
		`{"UNIT":"a\u002eservice"}`,
		`{"UNIT":"caf` + "\xc3\xa9" + `.service"}`,
		`{"UNIT":"bad` + "\xff" + `.service"}`,
		`{"UNIT":"ctl` + "\x01" + `"}`,
		`{"MESSAGE":"say \"hi\"","CODE_FUNC":"service_enter_dead","UNIT":"a.service"}`,
		`{"MESSAGE":"a.service: Failed with result 'exit-code'.","CODE_FUNC":"service_enter_dead","UNIT":"a.service"}`,
		`{"UNIT":"a.service",}`, `{"UNIT":"a.service"} }`, `{"UNIT" "a"}`, `{"UNIT":"a\x"}`, `{"UNIT":"a\u12"}`,
		`{"UN\u0049T":"escaped.key"}`, `{"` + "\u212a" + `":"kelvin"}`, `{"EXIT_STATUS":1}`,
		`{ "UNIT" : "pretty.service" , "INVOCATION_ID" : "abc" }`,
		`{"USER_INVOCATION_ID":"u1","USER_UNIT":"app.service","_UID":"1000"}`,
		`{"MESSAGE_ID":"39f53479d3a045ac8e11786248231fbf","UNIT":"a.service","MESSAGE":"Started a.service - Ä service` + "\u2026" + `"}`,
	}
	var out [][]byte
	for _, s := range seeds {
		out = append(out, []byte(s))
	}
	for _, name := range []string{"testdata/fleet.journal.json", "testdata/real/journald-fedora-deactivated.json"} {
		f, err := os.Open(filepath.FromSlash(name))
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			out = append(out, append([]byte(nil), sc.Bytes()...))
		}
		f.Close()
	}
	pretty, err := os.ReadFile("testdata/real/journald-239-bootkube.json-pretty")
	require.NoError(t, err)
	var entry []byte
	for line := range strings.SplitSeq(string(pretty), "\n") {
		entry = append(entry, strings.TrimSpace(line)...)
		if strings.TrimSpace(line) == "}" {
			out, entry = append(out, entry), nil
		}
	}
	return out
}

// TestScanEntryReadsAsEncodingJSON: the one-pass scan of journal entries
// reads every seed as encoding/json does, and accepts the entries
// journalctl writes (so that they take the fast path).
func TestScanEntryReadsAsEncodingJSON(t *testing.T) {
	accepted := 0
	for _, b := range scanSeeds(t) {
		checkScan(t, b)
		var e rawEntry
		if scanEntry(b, &e) {
			accepted++
		}
	}
	line := []byte(`{"MESSAGE_ID":"98e322203f7a4ed290d09fe03c09fe15","UNIT":"a.service","MESSAGE":"x"}`)
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() {
		var e rawEntry
		if !scanEntry(line, &e) {
			panic("not scanned")
		}
	}))
	// A MESSAGE beyond ASCII is left to encoding/json only where it is
	// read: a Started is read in the one pass, without allocating.
	started := []byte(`{"MESSAGE_ID":"39f53479d3a045ac8e11786248231fbf","UNIT":"a.service","MESSAGE":"Started a.service - \u00c4 \u2026 ` + "\u00c4\u2026" + `"}`)
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() {
		var e rawEntry
		if err := decodeEntry(started, &e); err != nil {
			panic(err)
		}
	}))
	// The real entries all take the fast path; of the seeds above, the 9
	// that are valid, flat, with the fields kept plain, do: {}, { }, the
	// exit, the duplicate UNIT, the three MESSAGEs, the pretty spacing and
	// the user unit.
	assert.Equal(t, 9+countLines(t, "testdata/fleet.journal.json")+1+10, accepted)
}

func countLines(t *testing.T, name string) int {
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return strings.Count(string(b), "\n")
}

// FuzzScanEntry holds the one-pass scan to encoding/json on any line.
func FuzzScanEntry(f *testing.F) {
	for _, b := range scanSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkScan(t, b) })
}
