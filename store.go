package crashloop

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// FileStore is a Store backed by one file, written atomically: Save writes
// the document to a temporary file in the same folder, flushes it to disk,
// renames it over the file and flushes the folder, so a crash at any moment
// leaves either the old document or the new one, never a torn or empty file.
//
// A FileStore is safe for concurrent use: saves from several goroutines are
// serialized and the file ends holding one of the documents whole. Saves
// from several processes are atomic too, but the last rename wins; a process
// that reads, changes and writes the file must lock around that itself. A
// process killed in the middle of a save may leave a temporary file named
// ".NAME.tmp-*" beside the file; it is never read, and may be deleted. A new
// file is created with mode 0600; an existing file keeps its mode. The zero
// value is not usable: create one with NewFileStore.
type FileStore struct {
	path string
	mu   sync.Mutex // serializes Save

	// fault, when set (by tests), is called at each step of Save ("write"
	// once the data is written, "sync" once it is flushed, "rename" just
	// before the rename); an error it returns fails the save there, as a
	// crash or a full disk would.
	fault func(step string) error
}

// NewFileStore returns a FileStore that keeps its document in the file at
// path. It does not touch the file system: a missing file is reported by
// Load, and a missing folder by Save.
func NewFileStore(path string) *FileStore {
	return &FileStore{path: path}
}

// Load returns the document in the file. When the file does not exist the
// error matches fs.ErrNotExist (and os.ErrNotExist). Load does not wait for
// a Save in progress: it reads the old document or the new one, whole.
func (f *FileStore) Load() ([]byte, error) {
	return os.ReadFile(f.path)
}

// Save replaces the document in the file with data, atomically and durably
// (see FileStore). An empty data is refused (an empty document is never
// valid, and refusing it keeps a bug from wiping the file). An error before
// the rename leaves the old document in place and no temporary file behind;
// an error flushing the folder after the rename leaves the new document in
// place, not yet known to be durable.
func (f *FileStore) Save(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("crashloop: save %s: empty document", f.path)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.save(data); err != nil {
		return fmt.Errorf("crashloop: save %s: %w", f.path, err)
	}
	return nil
}

func (f *FileStore) save(data []byte) (err error) {
	dir, base := filepath.Split(f.path)
	if dir == "" {
		dir = "."
	}
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(f.path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := f.step("write"); err != nil {
		return err
	}
	if err := tmp.Chmod(mode); err != nil && runtime.GOOS != "windows" {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := f.step("sync"); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := f.step("rename"); err != nil {
		return err
	}
	if err := os.Rename(name, f.path); err != nil {
		return err
	}
	return syncDir(dir)
}

func (f *FileStore) step(name string) error {
	if f.fault == nil {
		return nil
	}
	return f.fault(name)
}

// syncDir flushes a folder, so that a rename in it survives a crash. Windows
// cannot flush a folder (and does not need to).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
