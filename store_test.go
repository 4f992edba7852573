package crashloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errStoreInjected = errors.New("injected failure")

// storeDir lists the names in dir, sorted.
func storeDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestFileStoreSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	st := NewFileStore(path)

	_, err := st.Load()
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorIs(t, err, os.ErrNotExist)

	require.NoError(t, st.Save([]byte(`{"n": 1}`)))
	got, err := st.Load()
	require.NoError(t, err)
	assert.Equal(t, `{"n": 1}`, string(got))
	require.NoError(t, st.Save([]byte(`{"n": 2}`)))
	got, err = st.Load()
	require.NoError(t, err)
	assert.Equal(t, `{"n": 2}`, string(got))
	assert.Equal(t, []string{"state.json"}, storeDir(t, dir), "no temporary file is left behind")

	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), "a new file is private")
		require.NoError(t, os.Chmod(path, 0o640))
		require.NoError(t, st.Save([]byte(`{"n": 3}`)))
		fi, err = os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o640), fi.Mode().Perm(), "an existing file keeps its mode")
	}

	// A relative path saves in the working folder.
	t.Chdir(dir)
	rel := NewFileStore("rel.json")
	require.NoError(t, rel.Save([]byte("x")))
	got, err = os.ReadFile(filepath.Join(dir, "rel.json"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(got))
}

func TestFileStoreRefusesAnEmptyDocument(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	st := NewFileStore(path)
	require.NoError(t, st.Save([]byte("old")))
	err := st.Save(nil)
	require.Error(t, err)
	assert.Equal(t, "crashloop: save "+path+": empty document", err.Error())
	got, err := st.Load()
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
}

func TestFileStoreMissingFolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "state.json")
	err := NewFileStore(path).Save([]byte("x"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), "crashloop: save "+path+": ")
}

// A failure at any step of a save (a full disk, a crash simulated by the
// fault hook) leaves the old document whole and no temporary file.
func TestFileStoreFailureMidSaveKeepsTheOldDocument(t *testing.T) {
	for _, step := range []string{"write", "sync", "rename"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			st := NewFileStore(path)
			require.NoError(t, st.Save([]byte(`{"doc": "old"}`)))
			var steps []string
			st.fault = func(s string) error {
				steps = append(steps, s)
				if s == step {
					return errStoreInjected
				}
				return nil
			}
			err := st.Save([]byte(`{"doc": "new"}`))
			require.ErrorIs(t, err, errStoreInjected)
			assert.Equal(t, step, steps[len(steps)-1], "the save stopped at the failing step")
			got, err := st.Load()
			require.NoError(t, err)
			assert.Equal(t, `{"doc": "old"}`, string(got))
			assert.Equal(t, []string{"state.json"}, storeDir(t, dir))

			st.fault = nil
			require.NoError(t, st.Save([]byte(`{"doc": "new"}`)))
			got, err = st.Load()
			require.NoError(t, err)
			assert.Equal(t, `{"doc": "new"}`, string(got))
		})
	}

	// With no old document, a failed first save leaves no file at all (not
	// an empty one).
	dir := t.TempDir()
	st := NewFileStore(filepath.Join(dir, "state.json"))
	st.fault = func(s string) error {
		if s == "rename" {
			return errStoreInjected
		}
		return nil
	}
	require.ErrorIs(t, st.Save([]byte("new")), errStoreInjected)
	_, err := st.Load()
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Empty(t, storeDir(t, dir))
}

// A process killed between the write and the rename leaves the old
// document in place and a temporary file that nothing reads.
func TestFileStoreCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	st := NewFileStore(path)
	require.NoError(t, st.Save([]byte(`{"doc": "old"}`)))
	st.fault = func(s string) error {
		if s == "rename" {
			runtime.Goexit() // the goroutine dies here: no error path, no cleanup
		}
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.Save([]byte(`{"doc": "new"}`))
		t.Error("Save returned after the simulated crash")
	}()
	<-done
	st.fault = nil

	got, err := st.Load()
	require.NoError(t, err)
	assert.Equal(t, `{"doc": "old"}`, string(got))
	names := storeDir(t, dir)
	require.Len(t, names, 2)
	assert.Equal(t, "state.json", names[1])
	assert.Regexp(t, `^\.state\.json\.tmp-[0-9]+$`, names[0])

	require.NoError(t, st.Save([]byte(`{"doc": "newer"}`)), "the store still works (its lock was released)")
	got, err = st.Load()
	require.NoError(t, err)
	assert.Equal(t, `{"doc": "newer"}`, string(got))
}

// Saves from 8 goroutines end with one whole document, one of those
// written; readers in the meantime never see a torn one.
func TestFileStoreConcurrentSaves(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	st := NewFileStore(path)
	const writers, saves = 8, 40
	written := make(map[string]bool)
	docs := make([][][]byte, writers)
	for w := range writers {
		for i := range saves {
			doc, err := json.Marshal(map[string]any{"writer": w, "save": i, "pad": fmt.Sprintf("%0*d", 1000+w*100+i, 0)})
			require.NoError(t, err)
			docs[w] = append(docs[w], doc)
			written[string(doc)] = true
		}
	}
	stop := make(chan struct{})
	var readErr error
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			data, err := st.Load()
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err == nil && !written[string(data)] {
				err = fmt.Errorf("read a document nobody wrote (%d bytes)", len(data))
			}
			if err != nil {
				readErr = err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, doc := range docs[w] {
				if err := st.Save(doc); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	require.NoError(t, readErr)

	data, err := st.Load()
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(data, &v))
	assert.True(t, written[string(data)], "the final file is one of the written documents")
	last := false
	for w := range writers {
		last = last || string(docs[w][saves-1]) == string(data)
	}
	assert.True(t, last, "saves are serialized: the final file is some writer's last document")
	assert.Equal(t, []string{"state.json"}, storeDir(t, dir))
}

// memStore is an in-memory Store that counts saves and can fail.
type memStore struct {
	mu      sync.Mutex
	data    []byte
	saves   int
	saveErr error
	loadErr error
}

func (m *memStore) Save(data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.saveErr != nil {
		return m.saveErr
	}
	m.data = append([]byte(nil), data...)
	m.saves++
	return nil
}

func (m *memStore) Load() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.loadErr != nil {
		return nil, m.loadErr
	}
	if m.data == nil {
		return nil, fs.ErrNotExist
	}
	return m.data, nil
}

func (m *memStore) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}

// storeConfig is a Supervisor that never sleeps: 2 respawns, no backoff.
func storeConfig() SupervisorConfig {
	cfg := DefaultSupervisorConfig()
	cfg.Budget = BudgetConfig{MaxRespawns: 2, Window: time.Minute}
	return cfg
}

func storeFail(context.Context) error { return errStoreInjected }

func TestSupervisorSavesOnParkAndResume(t *testing.T) {
	st := &memStore{}
	c := coreMock()
	s, err := NewSupervisor(storeConfig(), WithClock(c), WithStore(st))
	require.NoError(t, err)
	require.NoError(t, s.Run(context.Background(), "ok", func(context.Context) error { return nil }))
	assert.Equal(t, 0, st.count(), "without a save interval only parks and resumes save")

	require.ErrorIs(t, s.Run(context.Background(), "a", storeFail), ErrParked)
	require.Equal(t, 1, st.count())
	snap, err := s.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, string(snap), string(st.data), "the save holds the state after the park")

	require.NoError(t, s.Resume(context.Background(), "a"))
	require.Equal(t, 2, st.count())
	var doc supervisorDoc
	require.NoError(t, json.Unmarshal(st.data, &doc))
	assert.Nil(t, doc.Budget.Keys["a"].Parked)
	assert.Equal(t, StateExited, doc.Keys["a"].State)

	require.NoError(t, s.Save())
	assert.Equal(t, 3, st.count())
	assert.ErrorIs(t, s.Resume(context.Background(), "a"), ErrNotParked)
	assert.Equal(t, 3, st.count(), "a refused Resume changes nothing and saves nothing")
}

func TestSupervisorSaveErrorsDoNotStopIt(t *testing.T) {
	st := &memStore{saveErr: errStoreInjected}
	var mu sync.Mutex
	var got []error
	s, err := NewSupervisor(storeConfig(), WithClock(coreMock()), WithStore(st),
		WithSaveErrorHandler(func(err error) { mu.Lock(); got = append(got, err); mu.Unlock() }))
	require.NoError(t, err)
	var pe *ParkedError
	require.ErrorAs(t, s.Run(context.Background(), "a", storeFail), &pe, "Run returns its own outcome")
	assert.Equal(t, ReasonBudgetExhausted, pe.Reason)
	require.NoError(t, s.Resume(context.Background(), "a"), "Resume takes effect and does not return the save error")
	assert.Empty(t, s.Parked())
	mu.Lock()
	assert.Equal(t, []error{errStoreInjected, errStoreInjected}, got)
	mu.Unlock()

	require.ErrorIs(t, s.Save(), errStoreInjected, "Save returns the error")
	mu.Lock()
	assert.Len(t, got, 2, "and does not pass it to the handler too")
	mu.Unlock()

	// Without a handler the error is dropped.
	s2, err := NewSupervisor(storeConfig(), WithClock(coreMock()), WithStore(st))
	require.NoError(t, err)
	require.ErrorIs(t, s2.Run(context.Background(), "a", storeFail), ErrParked)
}

func TestSupervisorSaveWithoutStore(t *testing.T) {
	s, err := NewSupervisor(storeConfig(), WithClock(coreMock()))
	require.NoError(t, err)
	assert.Equal(t, errNoStore, s.Save())
	require.ErrorIs(t, s.Run(context.Background(), "a", storeFail), ErrParked)
}

func TestSupervisorLoadsItsStore(t *testing.T) {
	_, err := NewSupervisor(storeConfig(), WithStore(&memStore{loadErr: errStoreInjected}))
	require.ErrorIs(t, err, errStoreInjected)
	assert.Equal(t, "crashloop: loading the Supervisor's state: injected failure", err.Error())

	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"version": 1, "kind": "supervisor", "budg`), 0o600))
	_, err = NewSupervisor(storeConfig(), WithStore(NewFileStore(path)))
	require.ErrorIs(t, err, ErrBadSnapshot, "a damaged file never silently resets the guards")

	require.NoError(t, os.WriteFile(path, []byte(`{"version": 1, "kind": "respawn_budget", "keys": {}}`), 0o600))
	_, err = NewSupervisor(storeConfig(), WithStore(NewFileStore(path)))
	require.ErrorIs(t, err, ErrBadSnapshot)
	assert.Contains(t, err.Error(), `supervisor: kind "respawn_budget", want "supervisor"`)

	require.NoError(t, os.Remove(path))
	s, err := NewSupervisor(storeConfig(), WithStore(NewFileStore(path)))
	require.NoError(t, err, "a missing file is a fresh start")
	assert.Empty(t, s.Parked())
	_, err = os.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist, "loading writes nothing")
}

func TestSupervisorSaveInterval(t *testing.T) {
	st := &memStore{}
	c := coreMock()
	s, err := NewSupervisor(storeConfig(), WithClock(c), WithStore(st), WithSaveInterval(10*time.Second))
	require.NoError(t, err)
	clean := func(context.Context) error { return nil }

	require.NoError(t, s.Run(context.Background(), "a", clean)) // running, exited
	assert.Equal(t, 1, st.count(), "the first state change saves")
	c.Add(9 * time.Second)
	require.NoError(t, s.Run(context.Background(), "a", clean))
	assert.Equal(t, 1, st.count(), "9s later: not yet")
	c.Add(time.Second)
	require.NoError(t, s.Run(context.Background(), "a", clean))
	assert.Equal(t, 2, st.count(), "10s after the last save")
	var doc supervisorDoc
	require.NoError(t, json.Unmarshal(st.data, &doc))
	assert.Equal(t, StateRunning, doc.Keys["a"].State, "saved at the start of the run")

	require.ErrorIs(t, s.Run(context.Background(), "b", storeFail), ErrParked)
	assert.Equal(t, 3, st.count(), "a park saves whatever the interval")
	require.NoError(t, json.Unmarshal(st.data, &doc))
	assert.Equal(t, StateParked, doc.Keys["b"].State)

	// A store that fails is tried once an interval, not on every change.
	st.mu.Lock()
	st.saveErr = errStoreInjected
	st.mu.Unlock()
	var fails int
	s2, err := NewSupervisor(storeConfig(), WithClock(c), WithStore(st), WithSaveInterval(10*time.Second),
		WithSaveErrorHandler(func(error) { fails++ }))
	require.NoError(t, err)
	for range 5 {
		require.NoError(t, s2.Run(context.Background(), "a", clean))
	}
	assert.Equal(t, 1, fails)
}

// Keys parked by concurrent Runs are all in the store at the end: saves are
// serialized with their snapshots, so the last one saved is the newest.
func TestSupervisorConcurrentParksAllSaved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	cfg := storeConfig()
	cfg.Fleet = nil // half the fleet parked would trip it and hold the rest on a clock that never moves
	s, err := NewSupervisor(cfg, WithClock(coreMock()), WithStore(NewFileStore(path)),
		WithSaveInterval(time.Nanosecond))
	require.NoError(t, err)
	const keys = 8
	var wg sync.WaitGroup
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.ErrorIs(t, s.Run(context.Background(), fmt.Sprintf("k%d", k), storeFail), ErrParked)
		}()
	}
	wg.Wait()
	want := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	assert.Equal(t, want, s.Parked())

	s2, err := NewSupervisor(cfg, WithClock(coreMock(coreT0.Add(time.Hour))), WithStore(NewFileStore(path)))
	require.NoError(t, err)
	assert.Equal(t, want, s2.Parked())
	for _, key := range want {
		assert.ErrorIs(t, s2.Run(context.Background(), key, storeFail), ErrParked)
	}
}

// Calls that race for a guard's lock read the clock in one order and may
// take the lock in the other; each reads its time through the guard's timebase
// under the lock, so the window stays in order (window.Push relies on it)
// and a snapshot of it restores.
func TestRacedReadingsKeepTheWindowInOrder(t *testing.T) {
	g, err := NewRestartLoopGuard(10000, time.Hour, WithClock(coreMock()))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				// Readings of the goroutines interleave: each lags the
				// others by a few microseconds.
				g.RecordAt(coreT0.Add(time.Duration(i)*time.Millisecond + time.Duration(w)*time.Microsecond))
			}
		}()
	}
	wg.Wait()
	g.mu.Lock()
	events := g.win.AppendTo(nil)
	g.mu.Unlock()
	require.Len(t, events, 4000)
	assert.True(t, slices.IsSorted(events), "the window is out of order")
	data, err := g.Snapshot()
	require.NoError(t, err)
	g2, err := NewRestartLoopGuard(10000, time.Hour, WithClock(coreMock()))
	require.NoError(t, err)
	require.NoError(t, g2.RestoreAt(data, coreT0.Add(time.Second)))
	assert.Equal(t, 4000, g2.RestartsAt(coreT0.Add(time.Second)))
}
