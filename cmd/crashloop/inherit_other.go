//go:build unix && !linux

package main

// sigState would be the signal state crashloop was started with; off
// Linux it is not read, and the program gets what the Go runtime of the
// exec shim leaves it.
type sigState struct{}

func readSigState() sigState                 { return sigState{} }
func (sigState) String() string              { return "" }
func parseSigState(string) (sigState, error) { return sigState{}, nil }
func (sigState) restore() error              { return nil }

// terminal would be the terminal crashloop runs in the foreground of; off
// Linux, the program's group is never given it.
type terminal struct{}

func foregroundTerminal() *terminal { return nil }
func (*terminal) give(int) error    { return nil }
func (*terminal) takeBack() error   { return nil }
