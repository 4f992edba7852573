// Package errtext is the text of the errors of the library and of its
// nested modules: an error restored from the text it was kept as, which
// still matches its sentinel, and counted nouns in messages. It imports
// nothing of the library, so that the library itself can use it.
package errtext

import (
	"errors"
	"strconv"
)

// Restore returns an error restored from text, the Error of an error that
// was kept or sent as text (a snapshot, a shared ledger's record): its
// Error is text and, when sentinel is not nil, errors.Is(err, sentinel)
// holds, as it did for the error the text came from; with a nil sentinel it
// is errors.New(text). It keeps no state and is safe for concurrent use;
// the error it returns is immutable.
func Restore(text string, sentinel error) error {
	if sentinel == nil {
		return errors.New(text)
	}
	return &restored{text: text, sentinel: sentinel}
}

// restored is an error restored from its text that still matches its
// sentinel.
type restored struct {
	text     string
	sentinel error
}

func (e *restored) Error() string        { return e.text }
func (e *restored) Is(target error) bool { return target == e.sentinel }

// Plural writes n and noun, adding an s unless n is 1: "1 respawn", "3
// respawns", "0 starts". It is safe for concurrent use.
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
