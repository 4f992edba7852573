//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
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

// mark is why a program is parked: with how its last run ended (its
// exit_code or signal, and its stderr_tail), when known.
type mark struct {
	Reason    string `json:"reason"`
	LastError string `json:"last_error,omitempty"`
	Starts    int    `json:"starts"`
	errtext.Exit
	Since   time.Time `json:"since"`
	Command []string  `json:"command,omitempty"`
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
// and an error otherwise.
func (s *stateStore) load(missingOK bool) (*stateFile, error) {
	data, err := s.store.Load()
	switch {
	case errors.Is(err, fs.ErrNotExist) && missingOK:
		return &stateFile{Version: stateVersion, Marks: map[string]mark{}}, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, fail(exitError, "state file %s does not exist", s.path)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("state file %s: %w", s.path, err)
	}
	var st stateFile
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, usagef("state file %s is malformed: %v", s.path, err)
	}
	if st.Version != stateVersion {
		return nil, usagef("state file %s has version %d, want %d", s.path, st.Version, stateVersion)
	}
	if st.Marks == nil {
		st.Marks = map[string]mark{}
	}
	for key, m := range st.Marks {
		if key == "" || m.Reason == "" {
			return nil, usagef("state file %s is malformed: mark %q has no reason", s.path, key)
		}
	}
	return &st, nil
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
	if _, err := s.store.Load(); !errors.Is(err, fs.ErrNotExist) {
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
