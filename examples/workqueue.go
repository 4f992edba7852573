package examples

import (
	"context"
	"errors"

	"github.com/crashloopguard/crashloop"
	"k8s.io/client-go/util/workqueue"
)

// RunWorker processes the items of q with handle until q shuts down, as a
// controller's worker does (start several on one queue; shut q down when
// ctx ends). See ProcessNextItem.
func RunWorker(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sup *crashloop.Supervisor, handle func(ctx context.Context, key string) error) {
	for ProcessNextItem(ctx, q, sup, handle) {
	}
}

// ProcessNextItem takes one item from q and handles it as one run of its
// key under sup. It returns false once q has shut down.
//
// The usual worker requeues a failed item with q.AddRateLimited: the
// queue's per-item exponential backoff (5ms doubling to 1000s by default)
// retries a crash-looping item forever. Here sup.Process judges each run
// instead, and the item is
//
//   - requeued after crashloop's backoff (500ms, 1s, 1.5s ... by default;
//     or, while the fleet breaker is tripped, after the hold) when it failed;
//   - done when it succeeded: q.Forget and sup.Forget clear its history, so
//     a later failure of the same key starts with a full budget;
//   - dropped when its key is parked (q.Forget, then q.Done): the budget was
//     spent, the park was announced once (EventStartupExhausted), and the
//     item stays out of the queue until ResumeItem; if something adds it
//     again meanwhile, it is dropped again at once, without running handle.
func ProcessNextItem(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sup *crashloop.Supervisor, handle func(ctx context.Context, key string) error) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)

	d := sup.Process(ctx, key, func(ctx context.Context) error { return handle(ctx, key) })
	var parked *crashloop.ParkedError
	switch {
	case d.Action != crashloop.ActionStop: // ActionRestart or ActionHold
		q.AddAfter(key, d.Wait)
	case d.Err == nil:
		q.Forget(key)
		// Forget fails only for a key being processed (the queue never hands
		// out one key twice at once), the empty key (Process refused it), an
		// ended ctx (the worker is stopping) or, with a shared ledger, one
		// that cannot be reached: the key's history then stays.
		_ = sup.Forget(ctx, key)
	case errors.As(d.Err, &parked):
		q.Forget(key)
	default:
		// ctx ended during the run: leave the item to the queue's shutdown.
	}
	return true
}

// ResumeItem is the operator's way back for a parked item: it resumes key
// in sup (a full budget) and adds the item to q again. It returns an error
// matching crashloop.ErrNotParked, and adds nothing, when key is not parked;
// and ctx's error, adding nothing, when ctx ends before a shared ledger
// answers.
func ResumeItem(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sup *crashloop.Supervisor, key string) error {
	if err := sup.Resume(ctx, key); err != nil {
		return err
	}
	q.Add(key)
	return nil
}
