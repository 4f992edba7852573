package examples

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crashloopguard/crashloop"
	"k8s.io/client-go/util/workqueue"
)

const (
	badItem  = "default/db-sync"
	goodItem = "default/api"
)

func newQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
}

// controllerProcessNextItem is the usual controller worker, before
// crashloop: a failed item is requeued with the queue's rate limiter.
func controllerProcessNextItem(q workqueue.TypedRateLimitingInterface[string], handle func(key string) error) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	if err := handle(key); err != nil {
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}

// The workqueue alone retries a failing item forever, 5ms, 10ms, 20ms ...
// apart: 14 tries in the first minute (the 14th at 40.955s), the 15th at
// 81.915s, and so on up to 1000s apart.
func TestWorkqueueAloneRetriesForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue()
		starts := newStarts()
		done := make(chan struct{})
		defer func() { q.ShutDown(); <-done }()
		go func() {
			defer close(done)
			for controllerProcessNextItem(q, func(string) error {
				starts.note()
				return errRefused
			}) {
			}
		}()
		q.Add(badItem)

		time.Sleep(time.Minute)
		synctest.Wait()
		var want []time.Duration
		for k := range 14 {
			want = append(want, 5*time.Millisecond*time.Duration(1<<k-1))
		}
		if got := starts.times(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("tries in the first minute: %v, want %v", got, want)
		}
		if n := q.NumRequeues(badItem); n != 14 {
			t.Errorf("NumRequeues = %d, want 14 (still queued)", n)
		}

		time.Sleep(30 * time.Second) // still going
		synctest.Wait()
		if got := starts.times(); len(got) != 15 || got[14] != 81915*time.Millisecond {
			t.Errorf("tries after 90s: %v, want a 15th at 1m21.915s", got)
		}
	})
}

// With crashloop, the failing item is tried 4 times, 500ms, 1s and 1.5s
// apart, then dropped (Forget, Done) and the queue drains, while a healthy
// item added every second is handled each time. An add of the parked item
// is dropped at once; ResumeItem brings it back.
func TestWorkqueueProcessParksCrashLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, evs := newSupervisor(t)
		q := newQueue()
		bad, good := newStarts(), newStarts()
		var fixed atomic.Bool
		handle := func(_ context.Context, key string) error {
			if key == goodItem {
				good.note()
				return nil
			}
			bad.note()
			if !fixed.Load() {
				return errRefused
			}
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var workers sync.WaitGroup
		for range 2 {
			workers.Go(func() { RunWorker(ctx, q, sup, handle) })
		}
		defer func() { q.ShutDown(); workers.Wait() }()
		q.Add(badItem)
		go func() { // a healthy item, added every second for 10s
			for range 10 {
				q.Add(goodItem)
				time.Sleep(time.Second)
			}
		}()

		time.Sleep(time.Minute)
		synctest.Wait()
		if got := bad.times(); fmt.Sprint(got) != fmt.Sprint(wantStarts) {
			t.Errorf("tries of the failing item: %v, want %v", got, wantStarts)
		}
		if n := good.n(); n != 10 {
			t.Errorf("the healthy item was handled %d times, want 10", n)
		}
		if n, r := q.Len(), q.NumRequeues(badItem); n != 0 || r != 0 {
			t.Errorf("queue length %d, requeues of the failing item %d; want 0, 0", n, r)
		}
		if rest := checkBudgetEvents(t, evs, badItem); len(rest) != 0 {
			t.Errorf("events of %s after the park: %v", badItem, rest)
		}
		if got := evs.of(goodItem); len(got) != 0 {
			t.Errorf("events of the healthy item: %v", got)
		}
		keys := sup.Status(context.Background()).Keys
		if len(keys) != 1 || keys[badItem].State != crashloop.StateParked {
			t.Errorf("Status: %v, want only %s, parked (done items are forgotten)", keys, badItem)
		}

		// A resync adds the parked item again: it is dropped without a run
		// and without a second announcement.
		q.Add(badItem)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := bad.n(); n != 4 {
			t.Errorf("the parked item was tried again: %d tries", n)
		}
		if n := evs.count(crashloop.EventStartupExhausted); n != 1 || q.Len() != 0 {
			t.Errorf("%d parks announced, queue length %d; want 1, 0", n, q.Len())
		}

		// Fixed and resumed: handled once more, done, forgotten.
		fixed.Store(true)
		if err := ResumeItem(ctx, q, sup, badItem); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := bad.n(); n != 5 {
			t.Errorf("tries after ResumeItem: %d, want 5", n)
		}
		if keys := sup.Status(context.Background()).Keys; len(keys) != 0 || q.Len() != 0 {
			t.Errorf("Status after the resumed item succeeded: %v, queue length %d; want empty", keys, q.Len())
		}
		if n := evs.count(crashloop.EventResumed); n != 1 {
			t.Errorf("%d resumes announced, want 1", n)
		}
		if err := ResumeItem(ctx, q, sup, badItem); !errors.Is(err, crashloop.ErrNotParked) || q.Len() != 0 {
			t.Errorf("ResumeItem of a key that is not parked: %v, queue length %d", err, q.Len())
		}
	})
}

// An item that fails twice, succeeds, is added again and fails three times
// before it succeeds is never parked: its success forgot the key, so the
// second round starts with a full budget (500ms, 1s, 1.5s again). Without
// sup.Forget, a success before HealthyAfter does not clear the budget, and
// the second round would park on its second failure.
func TestWorkqueueSuccessRestoresBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, evs := newSupervisor(t)
		q := newQueue()
		starts := newStarts()
		results := []error{errRefused, errRefused, nil, errRefused, errRefused, errRefused, nil}
		handle := func(context.Context, string) error {
			starts.note()
			return results[starts.n()-1]
		}
		var workers sync.WaitGroup
		workers.Go(func() { RunWorker(context.Background(), q, sup, handle) })
		defer func() { q.ShutDown(); workers.Wait() }()

		q.Add("default/flaky")
		time.Sleep(2 * time.Second)
		q.Add("default/flaky") // an update of the object: reconcile it again
		time.Sleep(time.Minute)
		synctest.Wait()
		want := []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond, // done
			2 * time.Second, 2500 * time.Millisecond, 3500 * time.Millisecond, 5 * time.Second} // done
		if got := starts.times(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("tries: %v, want %v", got, want)
		}
		if n := evs.count(crashloop.EventStartupExhausted); n != 0 {
			t.Errorf("%d parks, want none", n)
		}
		if keys := sup.Status(context.Background()).Keys; len(keys) != 0 || q.Len() != 0 {
			t.Errorf("Status: %v, queue length %d; want both empty", keys, q.Len())
		}
	})
}
