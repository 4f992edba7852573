//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// The most crashloop reads of each file it is given, and of a request's
// body: a file past its limit is refused after reading limit+1 bytes, so
// a huge or endless file (a mistyped path to a log, /dev/zero) costs no
// more memory than the limit. docs/cli.md lists them.
const (
	maxConfigSize = 1 << 20  // --config: 1 MiB, a thousand times the largest real configuration
	maxStateSize  = 16 << 20 // --state: 16 MiB, some 50,000 parks with their last errors
	maxTokenSize  = 4 << 10  // --admin-token-file: 4 KiB
	maxBodySize   = 4 << 10  // the body of POST /resume, which crashloop does not need
	maxHeaderSize = 16 << 10 // the header of a request to --metrics-addr
)

// errTooLarge is the error of readLimited for a file past its limit.
type errTooLarge struct{ limit int64 }

func (e *errTooLarge) Error() string {
	return fmt.Sprintf("larger than %s, the most crashloop reads", sizeText(e.limit))
}

// readLimited reads the file at path, or fails with an *errTooLarge when
// it holds more than limit bytes: a regular file is refused by its size,
// before it is read; anything else (a pipe, a device) after limit+1 bytes. Errors are those of the file, without
// the path (the caller names it as the user gave it).
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, &errTooLarge{limit} // refused before a byte is read
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1)) // a file that grows, a pipe, a device
	switch {
	case err != nil:
		return nil, unwrapPath(err)
	case int64(len(data)) > limit:
		return nil, &errTooLarge{limit}
	}
	return data, nil
}

// unwrapPath returns the cause of a *fs.PathError, which names the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// sizeText writes a limit in bytes, KiB or MiB.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
