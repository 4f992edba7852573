package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"time"

	"github.com/crashloopguard/crashloop"
)

// stateVersion is the version of the state file's format.
const stateVersion = 1

// stateFile is the document behind --state: the marks of parked and
// needs_human commands, by key. It is the operator's record, so it outlives
// crashloop processes and reboots.
type stateFile struct {
	Version int             `json:"version"`
	Marks   map[string]mark `json:"marks"`
}

// mark is why a command is parked.
type mark struct {
	Reason     string    `json:"reason"`
	LastError  string    `json:"last_error,omitempty"`
	Starts     int       `json:"starts"`
	ExitStatus *int      `json:"exit_status,omitempty"`
	Since      time.Time `json:"since"`
	Command    []string  `json:"command,omitempty"`
}

// stateStore reads and changes a state file. Every change is a
// read-modify-write under an exclusive lock on PATH.lock, and every write
// is atomic (crashloop.FileStore), so several crashloop processes sharing a
// file never lose each other's marks and a crash never leaves a torn file.
type stateStore struct {
	path  string
	store *crashloop.FileStore
}

func newStateStore(path string) *stateStore {
	return &stateStore{path: path, store: crashloop.NewFileStore(path)}
}

// load reads the state; a missing file is an empty state.
func (s *stateStore) load() (*stateFile, error) {
	data, err := s.store.Load()
	if errors.Is(err, fs.ErrNotExist) {
		return &stateFile{Version: stateVersion, Marks: map[string]mark{}}, nil
	}
	if err != nil {
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

// update applies change to the state under the lock and saves it if change
// reports a modification.
func (s *stateStore) update(change func(*stateFile) (bool, error)) error {
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return fmt.Errorf("state file %s: %w", s.path, err)
	}
	defer unlock()
	st, err := s.load()
	if err != nil {
		return err
	}
	changed, err := change(st)
	if err != nil || !changed {
		return err
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := s.store.Save(append(data, '\n')); err != nil {
		return fmt.Errorf("state file %s: %w", s.path, err)
	}
	return nil
}

// read returns the state under the lock (a consistent read).
func (s *stateStore) read() (*stateFile, error) {
	var out *stateFile
	err := s.update(func(st *stateFile) (bool, error) {
		out = st
		return false, nil
	})
	return out, err
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

// writeJSON prints the state as indented JSON.
func (st *stateFile) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(st)
}
