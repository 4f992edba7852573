package eventrec

import (
	"slices"
	"sync"
	"testing"
)

type event struct {
	kind int
	key  string
}

func isKind(k int) func(event) bool { return func(ev event) bool { return ev.kind == k } }

func TestRecorder(t *testing.T) {
	var r Recorder[event]
	if got := r.All(); got != nil {
		t.Fatalf("a zero Recorder holds %v", got)
	}
	r.HandleEvent(event{1, "a"})
	r.HandleEvent(event{2, "b"})
	r.HandleEvent(event{1, "c"})

	all := r.All()
	if want := []event{{1, "a"}, {2, "b"}, {1, "c"}}; !slices.Equal(all, want) {
		t.Fatalf("All() = %v, want %v", all, want)
	}
	all[0].key = "changed"
	if got := r.All()[0].key; got != "a" {
		t.Fatalf("All() shares memory with the Recorder: its first key became %q", got)
	}
	if got, want := r.Filter(isKind(1)), []event{{1, "a"}, {1, "c"}}; !slices.Equal(got, want) {
		t.Fatalf("Filter(kind 1) = %v, want %v", got, want)
	}
	if got := r.Filter(isKind(3)); got != nil {
		t.Fatalf("Filter(kind 3) = %v, want nil", got)
	}
	if got := r.Count(isKind(1)); got != 2 {
		t.Fatalf("Count(kind 1) = %d, want 2", got)
	}
	if got := r.Count(isKind(3)); got != 0 {
		t.Fatalf("Count(kind 3) = %d, want 0", got)
	}

	if got, want := r.Take(), []event{{1, "a"}, {2, "b"}, {1, "c"}}; !slices.Equal(got, want) {
		t.Fatalf("Take() = %v, want %v", got, want)
	}
	if got := r.Take(); got != nil {
		t.Fatalf("a second Take() = %v, want nil", got)
	}
	r.HandleEvent(event{4, "d"})
	if got, want := r.All(), []event{{4, "d"}}; !slices.Equal(got, want) {
		t.Fatalf("after Take, All() = %v, want %v", got, want)
	}
}

// Events handed from many goroutines are all kept, each once.
func TestRecorderConcurrent(t *testing.T) {
	var r Recorder[event]
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				r.HandleEvent(event{g, string(rune('a' + i%26))})
			}
		})
	}
	wg.Wait()
	for g := range 8 {
		if got := r.Count(isKind(g)); got != 100 {
			t.Errorf("Count(kind %d) = %d, want 100", g, got)
		}
	}
	if got := len(r.Take()); got != 800 {
		t.Errorf("Take() holds %d events, want 800", got)
	}
}
