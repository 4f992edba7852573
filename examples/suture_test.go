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
	"github.com/crashloopguard/crashloop/internal/eventrec"
	"github.com/thejerf/suture/v4"
)

// sutureSpec is suture's default spec, with NoJitter so that its failure
// backoff is exactly 15s (by default it is 15s to 22.5s), and the events
// recorded instead of logged.
func sutureSpec(hook *sutureEvents) suture.Spec {
	return suture.Spec{EventHook: hook.HandleEvent, BackoffJitter: suture.NoJitter{}}
}

// sutureEvents records the events of a suture supervisor
// (internal/eventrec); it is safe for concurrent use.
type sutureEvents struct {
	eventrec.Recorder[suture.Event]
}

// count returns how many events of type t were recorded.
func (e *sutureEvents) count(t suture.EventType) int {
	return e.Count(func(ev suture.Event) bool { return ev.Type() == t })
}

// serviceFunc is a plain suture service: what a program has before
// crashloop.
type serviceFunc struct {
	name  string
	serve func(ctx context.Context) error
}

func (s serviceFunc) Serve(ctx context.Context) error { return s.serve(ctx) }
func (s serviceFunc) String() string                  { return s.name }

// recorded records what each Serve of a service returned.
type recorded struct {
	svc  suture.Service
	mu   sync.Mutex
	errs []error
}

func (r *recorded) Serve(ctx context.Context) error {
	err := r.svc.Serve(ctx)
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	return err
}

func (r *recorded) String() string { return fmt.Sprint(r.svc) }

func (r *recorded) returned() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// ticker serves until ctx ends, counting a tick a second: a healthy
// service. It tells crashloop it is up first.
func ticker(ticks *atomic.Int64) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		crashloop.Ready(ctx)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				ticks.Add(1)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// Suture alone restarts a service that fails at once forever: 6 failures in
// a row, then its failure backoff pauses it 15s, then 6 more, and so on.
func TestSutureAloneRestartsForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		starts := newStarts()
		hook := &sutureEvents{}
		tree := suture.New("alone", sutureSpec(hook))
		tree.Add(serviceFunc{"db-sync", func(context.Context) error {
			starts.note()
			return errRefused
		}})
		ctx, cancel := context.WithCancel(context.Background())
		done := tree.ServeBackground(ctx)
		defer func() { cancel(); <-done }()

		time.Sleep(time.Minute)
		synctest.Wait()
		var want []time.Duration
		for burst := range 5 { // at 0s, 15s, 30s, 45s and 60s
			for range 6 {
				want = append(want, time.Duration(burst)*15*time.Second)
			}
		}
		if got := starts.times(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("starts in the first minute: %v, want %v", got, want)
		}
		if n := hook.count(suture.EventTypeBackoff); n != 5 {
			t.Errorf("suture paused %d times, want 5", n)
		}

		time.Sleep(15 * time.Second) // still going
		synctest.Wait()
		if n := starts.n(); n != 36 {
			t.Errorf("starts after 75s: %d, want 36", n)
		}
		if n := len(tree.Services()); n != 1 {
			t.Errorf("suture has %d services, want the crash-looping one", n)
		}
	})
}

// With crashloop, the crash-looping service is started 4 times, 500ms, 1s
// and 1.5s apart, then parked: its last Serve returns an error matching
// suture.ErrDoNotRestart and the *ParkedError, and suture removes it, while
// the healthy service keeps ticking. Resume and a new service bring it back.
func TestSutureServiceParksCrashLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, evs := newSupervisor(t)
		hook := &sutureEvents{}
		tree := suture.New("with-crashloop", sutureSpec(hook))

		starts := newStarts()
		var fixed atomic.Bool
		var ticks atomic.Int64
		dbSync := func(ctx context.Context) error {
			starts.note()
			if !fixed.Load() {
				return errRefused
			}
			return ticker(&ticks)(ctx)
		}
		bad := &recorded{svc: NewSutureService(sup, "db-sync", dbSync)}
		tree.Add(bad)
		var apiTicks atomic.Int64
		tree.Add(NewSutureService(sup, "api", ticker(&apiTicks)))
		ctx, cancel := context.WithCancel(context.Background())
		done := tree.ServeBackground(ctx)
		defer func() { cancel(); <-done }()

		time.Sleep(time.Minute)
		synctest.Wait()
		if got := starts.times(); fmt.Sprint(got) != fmt.Sprint(wantStarts) {
			t.Errorf("starts of db-sync: %v, want %v", got, wantStarts)
		}
		errs := bad.returned()
		if len(errs) != 4 {
			t.Fatalf("db-sync's Serve returned %d times: %v, want 4", len(errs), errs)
		}
		for i, err := range errs[:3] {
			if err != errRefused {
				t.Errorf("Serve %d returned %v, want the failure itself (suture restarts it)", i+1, err)
			}
		}
		refusal := errs[3]
		if !errors.Is(refusal, suture.ErrDoNotRestart) {
			t.Errorf("last Serve returned %v, want it to match suture.ErrDoNotRestart", refusal)
		}
		checkParked(t, refusal, "db-sync")
		if rest := checkBudgetEvents(t, evs, "db-sync"); len(rest) != 0 {
			t.Errorf("events of db-sync after the park: %v", rest)
		}
		if n := evs.count(crashloop.EventStartupExhausted); n != 1 {
			t.Errorf("%d parks announced, want 1", n)
		}
		// Suture saw 3 failures, spread over 3s: never enough for its own
		// backoff. It removed db-sync; api runs on.
		if n := hook.count(suture.EventTypeServiceTerminate); n != 3 {
			t.Errorf("suture saw %d failures, want 3", n)
		}
		if n := hook.count(suture.EventTypeBackoff); n != 0 {
			t.Errorf("suture paused %d times, want 0", n)
		}
		if svcs := tree.Services(); len(svcs) != 1 || fmt.Sprint(svcs[0]) != "api" {
			t.Errorf("suture's services: %v, want [api]", svcs)
		}
		if n := apiTicks.Load(); n != 60 {
			t.Errorf("api ticked %d times in a minute, want 60", n)
		}
		st := sup.Status(context.Background()).Keys
		if st["db-sync"].State != crashloop.StateParked || st["api"].State != crashloop.StateRunning {
			t.Errorf("states: db-sync %s, api %s; want parked, running", st["db-sync"].State, st["api"].State)
		}

		// The operator fixes the cause, resumes the key and adds the
		// service again: it starts at once, with a full budget.
		fixed.Store(true)
		if err := sup.Resume(context.Background(), "db-sync"); err != nil {
			t.Fatal(err)
		}
		tree.Add(NewSutureService(sup, "db-sync", dbSync))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := starts.n(); n != 5 {
			t.Errorf("db-sync started %d times, want 5", n)
		}
		if n := ticks.Load(); n != 10 {
			t.Errorf("db-sync ticked %d times in 10s after Resume, want 10", n)
		}
		if st := sup.Status(context.Background()).Keys["db-sync"]; st.State != crashloop.StateRunning || st.TotalRestarts != 0 {
			t.Errorf("db-sync after Resume: %s with %d restarts, want running with 0", st.State, st.TotalRestarts)
		}
		if n := evs.count(crashloop.EventResumed); n != 1 {
			t.Errorf("%d resumes announced, want 1", n)
		}
	})
}

// A planned restart (crashloop.Restart) is restarted by suture at once; a
// clean exit ends supervision in crashloop, and the service tells suture
// not to restart it.
func TestSutureServiceCleanExitAndPlannedRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, evs := newSupervisor(t)
		tree := suture.New("with-crashloop", sutureSpec(&sutureEvents{}))
		starts := newStarts()
		svc := &recorded{svc: NewSutureService(sup, "migrate", func(context.Context) error {
			starts.note()
			if starts.n() == 1 {
				return crashloop.Restart(nil) // e.g. reload its config
			}
			return nil // done
		})}
		tree.Add(svc)
		ctx, cancel := context.WithCancel(context.Background())
		done := tree.ServeBackground(ctx)
		defer func() { cancel(); <-done }()

		time.Sleep(time.Minute)
		synctest.Wait()
		if got := starts.times(); fmt.Sprint(got) != fmt.Sprint([]time.Duration{0, 0}) {
			t.Errorf("starts: %v, want [0s 0s]", got)
		}
		errs := svc.returned()
		if len(errs) != 2 || errs[0] != nil || errs[1] != suture.ErrDoNotRestart {
			t.Errorf("Serve returned %v, want [<nil> %v]", errs, suture.ErrDoNotRestart)
		}
		if n := len(tree.Services()); n != 0 {
			t.Errorf("suture still has %d services", n)
		}
		got := evs.of("migrate")
		if len(got) != 1 || got[0].Kind != crashloop.EventRestartScheduled || got[0].Reason != "planned" {
			t.Errorf("events: %v, want one planned restart", got)
		}
		if st := sup.Status(context.Background()).Keys["migrate"].State; st != crashloop.StateExited {
			t.Errorf("migrate is %s, want exited", st)
		}
	})
}
