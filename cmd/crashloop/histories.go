//go:build unix

package main

import (
	"os"

	"github.com/crashloopguard/crashloop/replay"
)

// openHistories opens each HISTORY argument of replay and tune ("-" is
// standard input) as a source of format f, and returns a function that
// closes the files. A file that cannot be opened is bad input, named.
func openHistories(paths []string, f replay.Format) ([]replay.Source, func(), error) {
	var sources []replay.Source
	var files []*os.File
	closeAll := func() {
		for _, file := range files {
			file.Close()
		}
	}
	for _, path := range paths {
		if path == "-" {
			sources = append(sources, replay.Source{Name: "stdin", R: os.Stdin, Format: f})
			continue
		}
		file, err := os.Open(path)
		if err != nil {
			closeAll()
			return nil, nil, usagef("%s: %v", path, unwrapPath(err))
		}
		files = append(files, file)
		sources = append(sources, replay.Source{Name: path, R: file, Format: f})
	}
	return sources, closeAll, nil
}
