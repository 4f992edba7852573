// Package examples puts crashloop inside the restart loops of other tools,
// with the real tools: a suture v4 service, a client-go workqueue worker and
// an errgroup of workers. Suture and the workqueue retry a failing function
// forever, and so does the usual hand-written loop around an errgroup
// worker; with crashloop in the loop, a function that keeps failing to
// start is parked after its budget (by default 3 respawns in 60s, waiting
// 500ms, 1s and 1.5s between the 4 attempts) and stays parked until an
// operator calls Supervisor.Resume, while the healthy ones keep working.
//
// Which helper of the library to use:
//
//   - The tool calls a func(ctx) error and restarts it when it returns (a
//     suture service's Serve, a framework's goroutine): Supervisor.Wrap, which
//     sleeps the backoff before returning and, with WithRefusal, returns the
//     tool's own "do not restart" error once the key is parked. See
//     NewSutureService.
//   - The tool retries an item by putting it back in a queue (a client-go
//     workqueue, a job table): Supervisor.Process, which runs the item once
//     and returns the Decision: requeue after d.Wait, or, on ActionStop, the
//     item is done (nil Err) or parked (a *ParkedError) and is dropped. See
//     ProcessNextItem.
//   - You write the loop yourself (an errgroup worker with its own logic
//     between runs): Supervisor.Proceed before a run and Supervisor.Decide
//     after it, the two calls Supervisor.Run itself is made of. See
//     Supervise. When the loop needs nothing of its own, call Supervisor.Run
//     instead.
//
// The tests run each tool alone and with crashloop inside a testing/synctest
// bubble, whose fake clock is the Supervisor's default clock, so minutes of
// restarts take microseconds and every wait is measured exactly.
package examples
