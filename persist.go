package crashloop

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"
)

// The saving of a Supervisor with a Store (WithStore): the snapshot it
// loads when it is created, and the saves after its state changes.

// persister is the save state of a Supervisor with a store.
type persister struct {
	mu    sync.Mutex // serializes snapshot-and-save: the last saved is the newest
	last  time.Time  // injected-clock time of the last successful save
	saved bool       // whether last is set
}

// errNoStore is returned by Supervisor.Save without WithStore.
var errNoStore = errors.New("crashloop: Save: the Supervisor has no store (see WithStore)")

// Save is shorthand for SaveAt(clock.Now()).
func (s *Supervisor) Save() error { return s.SaveAt(s.o.clock.Now()) }

// SaveAt saves a snapshot of the Supervisor to its store and returns the
// error, if any (it is not passed to WithSaveErrorHandler); now starts the
// next WithSaveInterval. Use it for a last save at shutdown. Without
// WithStore it returns an error. It is safe for concurrent use.
func (s *Supervisor) SaveAt(now time.Time) error {
	if s.o.store == nil {
		return errNoStore
	}
	s.persist.mu.Lock()
	defer s.persist.mu.Unlock()
	return s.saveLocked(now)
}

// saveLocked snapshots and saves; s.persist.mu must be held. A failed save
// also counts as the last save for the interval, so a broken store is not
// retried (and reported) on every state change.
func (s *Supervisor) saveLocked(now time.Time) error {
	s.persist.last, s.persist.saved = now, true
	data, err := s.Snapshot()
	if err != nil {
		return err
	}
	return s.o.store.Save(data)
}

// save saves a snapshot to the store at a park, an escalation, a resume or
// a forget (force), or on another state change once the save interval has passed
// since the last save. Errors go to the save error handler. The caller must
// hold no lock of the Supervisor.
func (s *Supervisor) save(now time.Time, force bool) {
	if s.o.store == nil || (!force && s.o.saveEvery <= 0) {
		return
	}
	p := &s.persist
	p.mu.Lock()
	if !force && p.saved && now.Sub(p.last) < s.o.saveEvery {
		p.mu.Unlock()
		return
	}
	err := s.saveLocked(now)
	p.mu.Unlock()
	if err != nil && s.o.saveErr != nil {
		s.o.saveErr(err)
	}
}

// load restores the snapshot in the store, if there is one, into a new
// Supervisor.
func (s *Supervisor) load() error {
	if s.o.store == nil {
		return nil
	}
	data, err := s.o.store.Load()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("crashloop: loading the Supervisor's state: %w", err)
	}
	return s.Restore(data)
}
