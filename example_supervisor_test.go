package crashloop_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/crashloopguard/crashloop"
)

// A worker that fails twice and then succeeds: each failed start spends one
// respawn of the budget, and a clean exit ends supervision.
func ExampleSupervisor_Run() {
	cfg := crashloop.DefaultSupervisorConfig()
	// No wait between restarts, so that the example runs at once. A real
	// program keeps the default curve: 500ms, 1s, 1.5s ... 5s.
	cfg.Budget.InitialBackoff, cfg.Budget.MaxBackoff = 0, 0

	sup, err := crashloop.NewSupervisor(cfg, crashloop.WithEventHandler(crashloop.EventHandlerFunc(func(ev crashloop.Event) {
		fmt.Printf("%s: respawn %d of %d (%v)\n", ev.Kind, ev.Attempts, ev.Limit, ev.LastError)
	})))
	if err != nil {
		fmt.Println(err)
		return
	}

	attempt := 0
	err = sup.Run(context.Background(), "importer", func(ctx context.Context) error {
		attempt++
		fmt.Println("start", attempt)
		if attempt < 3 {
			return errors.New("database not ready")
		}
		return nil // the import is done
	})
	fmt.Println("Run returned", err)
	// Output:
	// start 1
	// agent.respawn_scheduled: respawn 1 of 3 (database not ready)
	// start 2
	// agent.respawn_scheduled: respawn 2 of 3 (database not ready)
	// start 3
	// Run returned <nil>
}

// A worker that can never start is parked once its budget is spent, and
// stays parked until an operator resumes it. LogEvents writes each event as
// one structured line.
func ExampleSupervisor_Resume() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // drop the time, for a stable example
			}
			return a
		},
	}))
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Budget.MaxRespawns = 2
	cfg.Budget.InitialBackoff, cfg.Budget.MaxBackoff = 0, 0 // no waiting in the example

	sup, err := crashloop.NewSupervisor(cfg, crashloop.WithEventHandler(crashloop.LogEvents(logger)))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = sup.Run(context.Background(), "importer", func(ctx context.Context) error {
		return errors.New("missing API token")
	})
	fmt.Println("parked:", errors.Is(err, crashloop.ErrParked), sup.Parked())

	// Once the token is fixed:
	if err := sup.Resume(context.Background(), "importer"); err != nil {
		fmt.Println(err)
	}
	fmt.Println("parked:", sup.Parked())
	// Output:
	// level=WARN msg="key \"importer\" failed; respawn 1/2 now" event=agent.respawn_scheduled key=importer attempts=1 limit=2 window=60s backoff=0s last_error="missing API token"
	// level=WARN msg="key \"importer\" failed; respawn 2/2 now" event=agent.respawn_scheduled key=importer attempts=2 limit=2 window=60s backoff=0s last_error="missing API token"
	// level=ERROR msg="key \"importer\" parked (respawn_budget_exhausted, 2 respawns in 60s); it stays parked until an operator resumes it" event=agent.startup_exhausted key=importer reason=respawn_budget_exhausted attempts=2 limit=2 window=60s last_error="missing API token"
	// parked: true [importer]
	// level=INFO msg="key \"importer\" resumed with a full respawn budget" event=agent.resumed key=importer reason=respawn_budget_exhausted limit=2 window=60s last_error="missing API token"
	// parked: []
}
