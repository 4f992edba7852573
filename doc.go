// Package crashloop decides when to stop resurrecting something that keeps
// dying. It offers four guards, each catching a failure mode the others miss:
//
//   - RespawnBudget: a key that fails to start again and again gets a
//     bounded number of respawns in a rolling window (3 in 60s) with a linear
//     backoff (500ms, 1s, 1.5s ... 5s), then is parked until an operator
//     resumes it.
//   - ChainDetector: a slow loop that dies every 16-30 minutes and passes
//     every health check is caught by counting consecutive reactive rescues
//     of one incarnation, each within a reset gap (3 within 20m).
//   - RestartLoopGuard: a tight crash-on-resume storm trips a rolling-window
//     breaker (3 restarts in 60s).
//   - FleetSupervisionPolicy: a systemic fault that restarts everything at
//     once trips one fleet-wide breaker (40 restarts an hour, or half the
//     fleet failing), which holds restarts for a cooldown (120s) and re-arms.
//
// The guards are pure logic: no goroutines, no I/O, no globals. Each reads an
// injectable Clock (WithClock; *clock.Mock from github.com/benbjohnson/clock
// works as is), and each method that reads it has a form taking the time
// last (Record is shorthand for RecordAt(clock.Now())). Time never runs
// backwards for an object. State changes are announced through one
// EventHandler, after the change is committed and with no lock held. Every
// guard, the Supervisor and FileStore are safe for concurrent use.
//
// Above the guards, a Supervisor composes them per key: Run restarts a
// function when it fails; Decide is the same judgment for the restart
// loops of other tools; Wrap and Process adapt it to a service and a work
// queue. Snapshot and Restore export and take back any object's state, and
// WithStore makes a Supervisor save its own. WithSharing shares it between
// the replicas of a service (package share; on Redis, package redisstore).
// The Supervisor's methods that can wait on a shared layer take a
// context.Context first: a context that ends ends the call at once,
// committing nothing. The command under cmd/crashloop supervises any
// process with the library.
//
// Boundaries follow one rule everywhere: an event exactly a window old still
// counts, a chain gap of exactly the reset gap keeps the chain, a cooldown
// ends exactly at trip time + cooldown, and thresholds are >=.
package crashloop
