package errtext

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var errSentinel = errors.New("sentinel")

func TestRestoreMatchesItsSentinel(t *testing.T) {
	err := Restore("crashloop: \"a\" needs a human: boom", errSentinel)
	if got := err.Error(); got != "crashloop: \"a\" needs a human: boom" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(err, errSentinel) {
		t.Error("the restored error does not match its sentinel")
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", err), errSentinel) {
		t.Error("the wrapped restored error does not match its sentinel")
	}
	if errors.Is(err, errors.New("sentinel")) {
		t.Error("the restored error matches another error of the same text")
	}
}

func TestRestoreWithoutSentinel(t *testing.T) {
	err := Restore("boom", nil)
	if got := err.Error(); got != "boom" {
		t.Errorf("Error() = %q", got)
	}
	if errors.Is(err, errSentinel) {
		t.Error("an error restored without a sentinel matches one")
	}
	if fmt.Sprintf("%T", err) != fmt.Sprintf("%T", errors.New("")) {
		t.Errorf("an error restored without a sentinel is a %T, not errors.New's", err)
	}
	if got := Restore("", nil).Error(); got != "" {
		t.Errorf("Restore(\"\", nil).Error() = %q", got)
	}
}

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "start", "0 starts"},
		{1, "start", "1 start"},
		{2, "start", "2 starts"},
		{-1, "restart", "-1 restarts"},
		{3, "reactive rescue", "3 reactive rescues"},
	} {
		if got := Plural(tc.n, tc.noun); got != tc.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}

// exitErr is a failure that tells how a program ended.
type exitErr struct{ x Exit }

func (e *exitErr) Error() string     { return "sh exited with status 3" }
func (e *exitErr) ProgramExit() Exit { return e.x }

func TestTextKeepsHowTheProgramEnded(t *testing.T) {
	three := 3
	for _, x := range []Exit{
		{ExitCode: &three, StderrTail: "fatal: missing setting db_url\n\x00\xff"},
		{Signal: "KILL"},
	} {
		err := fmt.Errorf("wrapped: %w", &exitErr{x})
		text := Text(err)
		restored := Restore(text, errSentinel)
		if got := restored.Error(); got != "wrapped: sh exited with status 3" {
			t.Errorf("Error() = %q", got)
		}
		if !errors.Is(restored, errSentinel) {
			t.Error("the restored error does not match its sentinel")
		}
		got, ok := ExitOf(restored)
		want := x
		want.StderrTail = strings.ToValidUTF8(x.StderrTail, "\uFFFD") // as JSON keeps it
		if !ok || fmt.Sprint(got.ExitCode != nil, got.Signal, got.StderrTail) != fmt.Sprint(want.ExitCode != nil, want.Signal, want.StderrTail) ||
			(got.ExitCode != nil && *got.ExitCode != 3) {
			t.Errorf("ExitOf(Restore(Text)) = %+v, %v; want %+v", got, ok, want)
		}
		if again, _ := ExitOf(Restore(Text(restored), nil)); !reflect.DeepEqual(again, got) {
			t.Errorf("a restored error kept again: %+v, want %+v", again, got)
		}
		if plain := Restore(text, nil); errors.Is(plain, errSentinel) {
			t.Error("restored without a sentinel, it matches one")
		}
	}
}

func TestTextOfAPlainErrorIsItsError(t *testing.T) {
	for _, text := range []string{"boom", "", "a\x00{\"exit_code\":", "a\x00not json"} {
		if got := Text(errors.New(text)); got != text {
			t.Errorf("Text = %q, want %q", got, text)
		}
		if _, ok := ExitOf(Restore(text, nil)); ok {
			t.Errorf("Restore(%q) tells of an exit", text)
		}
		if got := Restore(text, nil).Error(); got != text {
			t.Errorf("Restore(%q).Error() = %q", text, got)
		}
	}
	if Text(nil) != "" {
		t.Error("Text(nil) is not empty")
	}
	if got := Text(&exitErr{}); got != "sh exited with status 3" {
		t.Errorf("Text of an empty Exit = %q, want the error alone", got)
	}
}
