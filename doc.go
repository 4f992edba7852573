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
// works as is), and each time-reading method has an explicit form taking the
// time as its last argument (Record is shorthand for RecordAt(clock.Now())).
// Time never runs backwards for an object: a reading earlier than one it
// already used is read as that later one. State changes are announced
// through one EventHandler, after the change is committed and with no lock
// held. Every guard, the Supervisor and FileStore are safe for concurrent
// use; configuration, status and event types are plain values.
//
// Above the guards, a Supervisor composes them per key: Run restarts a
// function when it fails (see Decide for what each way of ending means);
// Decide is the same judgment as one call for the restart loops of other
// tools, and Wrap and Process adapt it to a func(ctx) error service and to a
// work queue. Every guard and the Supervisor export their state with
// Snapshot and take it back with Restore, and WithStore makes a Supervisor
// save it by itself, so that a restart of the supervising program does not
// forget a crash loop. WithSharing shares the guards' state between the
// replicas of a service through package share (on Redis: package
// redisstore). The Supervisor's methods that can wait on a shared layer
// (Decide, Proceed, Resume, Forget, Status and their At forms) take a
// context.Context first, and Run, Wrap and Process pass theirs on: a
// context that is done, or ends while the call waits, ends the call at
// once with its error, committing nothing (a nil one is
// context.Background()). The guards' in-memory methods take none.
// The command under cmd/crashloop supervises any process with the library.
//
// Boundaries follow one rule everywhere: an event exactly a window old still
// counts, a chain gap of exactly the reset gap keeps the chain, a cooldown
// ends exactly at trip time + cooldown, and thresholds are >=.
package crashloop
