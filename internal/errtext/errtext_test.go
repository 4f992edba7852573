package errtext

import (
	"errors"
	"fmt"
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
