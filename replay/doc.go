// Package replay runs a candidate restart policy over restart history that
// already happened, and over synthetic programs, to show what the policy
// would have done before it is deployed: which keys it would have parked
// and when, how many restarts it would have spared, which parks would have
// been false (the program recovered on its own later in the history), when
// the fleet breaker would have tripped, and how much delay its backoffs
// would have added.
//
// History is read as a stream (Reader) from the formats of Format: the
// JSON of journalctl, kubectl and docker events, crashloop's own JSON log,
// and a plain CSV or JSON-lines form for everything else. Each key's runs
// are built from its starts and exits, and every run's end is judged by a
// crashloop.Supervisor under each candidate configuration, at the recorded
// time (DecideAt): the same judgment the Supervisor makes live. Replay
// keeps state per key, never per record, so a history of any length
// replays in bounded memory.
//
// Simulate runs synthetic programs (a crasher, a dependency outage) under
// candidate configurations and under the reference policies of other
// systems (Kubernetes, systemd, Docker, PM2; see ReferencePolicies).
//
// Tune searches candidate configurations for the one a history asks for:
// it reads the history once (LoadHistory), judges some 1,300 candidates
// over it as Replay would, in parallel, and returns the Pareto front of
// restarts spent on real crash loops, time to park and false parks, and
// the policy it recommends.
//
// Every function of the package is safe for concurrent use: each call has
// state of its own. A Reader, a Replayer, a Timeline and a Policy's
// Restarter are not safe for concurrent use, as their types say; a
// History is, as nothing changes it; the other types are plain values.
//
// The package uses the standard library only. See docs/replay.md in the
// repository for the formats and the measures, and docs/tune.md for
// Tune.
package replay
