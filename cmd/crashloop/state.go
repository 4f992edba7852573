//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop"
)

// stateVersion is the version of the state file's format.
const stateVersion = 1

// stateFile is the document behind --state: the marks of parked and
// needs_human programs, by key. It is the operator's record, so it outlives
// crashloop processes and reboots.
type stateFile struct {
	Version int             `json:"version"`
	Marks   map[string]mark `json:"marks"`
}

// mark is why a program is parked: the park's reason code, last error and
// time, what the guard that parked it counted (Attempts; absent from the
// marks of crashloops before it was added, whose Starts stand in), the
// program's starts, how its last run ended (its status, the signal that
// killed it and the last lines it wrote on stderr), its command line, and
// with --probe-after when its next probe is due and how many probes have
// started since the park.
type mark struct {
	Reason     string     `json:"reason"`
	LastError  string     `json:"last_error,omitempty"`
	Attempts   *int       `json:"attempts,omitempty"`
	Starts     int        `json:"starts"`
	ExitStatus *int       `json:"exit_status,omitempty"`
	Signal     string     `json:"signal,omitempty"`
	StderrTail string     `json:"stderr_tail,omitempty"`
	OOMKilled  bool       `json:"oom_killed,omitempty"`
	Since      time.Time  `json:"since"`
	Command    []string   `json:"command,omitempty"`
	NextProbe  *time.Time `json:"next_probe,omitempty"`
	Probes     int        `json:"probes,omitempty"`
}

// markOf returns the mark of a park: p, with the starts and command line
// of this crashloop; its exit status is the park's, or else that of this
// crashloop's last run (128+N for signal N), if it ended.
func markOf(p parkDoc, starts int, status *int, argv []string) mark {
	attempts := p.Attempts
	if p.ExitCode != nil {
		status = p.ExitCode
	}
	m := mark{Reason: p.Reason, LastError: p.LastError, Attempts: &attempts, Starts: starts, ExitStatus: status,
		Signal: p.Signal, StderrTail: p.StderrTail, OOMKilled: p.OOMKilled, Since: time.Time(p.Since), Command: argv}
	if p.NextProbe != nil {
		next := time.Time(*p.NextProbe)
		m.NextProbe = &next
	}
	return m
}

// park returns the mark of key as parkDoc.
func (m mark) park(key string) parkDoc {
	p := parkDoc{Key: key, Reason: m.Reason, Since: jsonTime(m.Since), Attempts: m.Starts, LastError: m.LastError, Signal: m.Signal,
		StderrTail: m.StderrTail, OOMKilled: m.OOMKilled}
	if m.Attempts != nil {
		p.Attempts = *m.Attempts
	}
	if m.ExitStatus != nil && m.Signal == "" {
		code := *m.ExitStatus
		p.ExitCode = &code
	}
	if m.NextProbe != nil {
		p.setProbe(*m.NextProbe)
	}
	return p
}

// stateStore reads and changes a state file. Every write is atomic
// (crashloop.FileStore: a temporary file renamed over the file), so a plain
// read always sees a whole document and needs no lock, nor write access to
// the folder. Every change is a read-modify-write under an exclusive flock
// of PATH.lock, so crashloop processes sharing a file never lose each
// other's marks.
type stateStore struct {
	path  string
	store *crashloop.FileStore
}

func newStateStore(path string) *stateStore {
	return &stateStore{path: path, store: crashloop.NewFileStore(path)}
}

// load reads the state. A missing file is an empty state when missingOK,
// and an error otherwise; an empty file (one that touch made) is an empty
// state. A file past maxStateSize is refused, read no further.
func (s *stateStore) load(missingOK bool) (*stateFile, error) {
	data, err := readLimited(s.path, maxStateSize)
	switch {
	case errors.Is(err, fs.ErrNotExist) && missingOK:
		return &stateFile{Version: stateVersion, Marks: map[string]mark{}}, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, fail(exitError, "state file %s does not exist", s.path)
	case errors.As(err, new(*errTooLarge)): // no state file is that large: a wrong path
		return nil, usagef("state file %s: %v", s.path, err)
	case err != nil:
		return nil, fmt.Errorf("state file %s: %w", s.path, err)
	case len(bytes.TrimSpace(data)) == 0:
		return &stateFile{Version: stateVersion, Marks: map[string]mark{}}, nil
	}
	st, err := decodeState(data)
	if err != nil {
		return nil, usagef("state file %s is malformed: %v", s.path, err)
	}
	if st.Version != stateVersion {
		return nil, usagef("state file %s has version %d, want %d", s.path, st.Version, stateVersion)
	}
	for key, m := range st.Marks {
		if why := checkKey(key); why != "" {
			return nil, usagef("state file %s is malformed: the key %s", s.path, why)
		}
		if m.Reason == "" {
			return nil, usagef("state file %s is malformed: mark %q has no reason", s.path, key)
		}
	}
	return st, nil
}

// decodeState reads a state file's document. Its errors name the field at
// fault by its path in the file ("marks.web.since"), not by Go's names.
func decodeState(data []byte) (*stateFile, error) {
	var doc struct {
		Version json.RawMessage            `json:"version"`
		Marks   map[string]json.RawMessage `json:"marks"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, jsonError("", err)
	}
	st := &stateFile{Marks: make(map[string]mark, len(doc.Marks))}
	if doc.Version != nil {
		if err := json.Unmarshal(doc.Version, &st.Version); err != nil {
			return nil, jsonError("version", err)
		}
	}
	for key, raw := range doc.Marks {
		var m mark
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, jsonError("marks."+key, err)
		}
		st.Marks[key] = m
	}
	return st, nil
}

// jsonError words an error of encoding/json for a document's reader:
// "marks.web.reason: must be a string, not a number", the field by its
// path in the document (under prefix), the types by their JSON names.
func jsonError(prefix string, err error) error {
	var te *json.UnmarshalTypeError
	var pe *time.ParseError
	path := prefix
	switch {
	case errors.As(err, &te):
		if te.Field != "" {
			path = strings.TrimPrefix(prefix+"."+te.Field, ".")
		}
		return located(path, fmt.Errorf("must be %s, not %s", jsonKind(te.Type), article(te.Value)))
	case errors.As(err, &pe):
		return located(path, errors.New("must be an RFC 3339 time such as 2026-01-02T03:04:05Z"))
	}
	return located(path, errors.New(strings.TrimPrefix(err.Error(), "json: ")))
}

// located prefixes err with path, if there is one.
func located(path string, err error) error {
	if path == "" {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// jsonKind names the JSON value that t reads, with its article.
func jsonKind(t reflect.Type) string {
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a JSON object"
}

// article returns encoding/json's name of a value, such as "number", with
// its article.
func article(v string) string {
	switch {
	case v == "":
		return "this"
	case strings.ContainsAny(v[:1], "aeiou"):
		return "an " + v
	}
	return "a " + v
}

// update applies change to the state under the lock, and saves it if
// change reports a modification. A missing file is an empty state.
func (s *stateStore) update(change func(*stateFile) (bool, error)) error {
	release, err := lockFile(s.path + ".lock")
	if err != nil {
		return fmt.Errorf("state file %s: %w", s.path, err)
	}
	defer release()
	st, err := s.load(true)
	if err != nil {
		return err
	}
	changed, err := change(st)
	if err != nil || !changed {
		return err
	}
	return s.save(st)
}

// create writes a state file with no marks unless the file exists, so that
// status reads a file from the start of the first crashloop that uses it.
func (s *stateStore) create() error {
	release, err := lockFile(s.path + ".lock")
	if err != nil {
		return fmt.Errorf("state file %s: %w", s.path, err)
	}
	defer release()
	if _, err := os.Stat(s.path); !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or an error that load reports
	}
	return s.save(&stateFile{Version: stateVersion, Marks: map[string]mark{}})
}

// save writes st; the caller holds the lock of PATH.lock.
func (s *stateStore) save(st *stateFile) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := s.store.Save(append(data, '\n')); err != nil {
		if cause := errors.Unwrap(err); cause != nil { // without the library's "crashloop: save PATH: "
			err = cause
		}
		return fmt.Errorf("state file %s: %w", s.path, err)
	}
	return nil
}

// checkFolder fails, naming --state, when the state file's folder does
// not exist (crashloop creates the file, not its folder) or is no folder.
func (s *stateStore) checkFolder() error {
	dir := filepath.Dir(s.path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usagef("--state %s: the folder %s does not exist (crashloop creates the file, not its folder: mkdir -p %s)", s.path, dir, shellQuote(dir))
	case err != nil:
		return usagef("--state %s: the folder %s: %v", s.path, dir, unwrapPath(err))
	case !fi.IsDir():
		return usagef("--state %s: %s is not a folder", s.path, dir)
	}
	return nil
}

// lockKey makes crashloop the one supervisor of key on this state file for
// as long as it runs: it holds an flock of PATH.KEY.lock (the key escaped
// as in a URL path), which holds its pid. When another crashloop holds it,
// lockKey fails with exit status 75 and names that crashloop's pid.
func (s *stateStore) lockKey(key string) (release func(), err error) {
	path := s.path + "." + url.PathEscape(key) + ".lock"
	release, holder, err := tryLockPID(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("lock %s: %w", path, err)
	case release == nil && holder > 0:
		return nil, fail(exitRunning, "%s is already supervised with --state %s by crashloop pid %d (it holds %s)", key, s.path, holder, path)
	case release == nil:
		return nil, fail(exitRunning, "%s is already supervised with --state %s by another crashloop (it holds %s)", key, s.path, path)
	}
	return release, nil
}

// keys returns the marked keys, sorted.
func (st *stateFile) keys() []string {
	keys := make([]string, 0, len(st.Marks))
	for k := range st.Marks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
