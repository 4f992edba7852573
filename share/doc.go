// Package share shares the guard state of a crashloop.Supervisor between
// the replicas of a service: a key parked by one is refused by every
// other, a resume on any applies to all, and the replicas keep one budget,
// one chain and one fleet breaker per key.
//
//	layer := share.New(ledger) // redisstore.Store, or a MemoryLedger
//	sup, err := crashloop.NewSupervisor(cfg, crashloop.WithSharing(layer))
//
// A Ledger keeps the state; each of its methods is one atomic step. The
// composed judgment is the Supervisor's own (a Judgment in, a Verdict
// out): MemoryLedger keeps it over the keys of the replicas of one
// process, and is the reference that package ledgertest holds every other
// ledger to.
//
// The protocol, told once:
//
//   - Deciding. A Supervisor asks its Layer first. The Layer sends the
//     run's Judgment to the ledger, and the Supervisor applies
//     the Verdict that comes back to its own records, which mirror the
//     ledger's. Each transition of a key (a park, a resume, a forget) takes
//     the ledger's next version; a change older than the one a replica
//     knows changes nothing.
//   - Failing. When the ledger fails, the Layer announces
//     EventStoreUnavailable (EventStoreMisconfigured for an error no retry
//     fixes) once, and the Supervisor decides alone with its own guards.
//     The Layer asks again every second, at the next call or, while a key
//     runs, by itself (the rejoiner).
//   - Writing back. A park decided alone is kept and written back when the
//     ledger answers, only if its key has not changed since; then
//     EventStoreRecovered tells how many were written. One write-back runs
//     at a time. Flush writes back at once, for a program about to exit.
//   - Announcing once. Every replica learns of a transition (its step's
//     reply, a notice, a lookup); whichever claims its version first on
//     the ledger announces it, so each park and resume is announced once
//     across replicas.
//   - Losing the state. A ledger that finds its server lost its state
//     returns a *StateLostError (or tells it in a Change); every replica
//     writes back the parks it knows, and one announces
//     EventStoreStateLost.
//   - Resume and forget name the version they act on, and are refused with
//     a *ChangedError if the key changed since; they are never done alone.
//   - Probing. The step that grants a parked key's probe moves its next
//     probe time forward, so one probe of a key runs at a time across
//     replicas. The probe's healthy step names the park it probed and
//     resumes only that park; the resume is announced once, by its claim.
//   - Holding. The step that flips a shared cause to held, and the one
//     that releases it, carry fleet.cause_held and fleet.cause_released:
//     one hold per cause per deployment, each announced at most once (a
//     lost reply loses it). Each probe time lets one held key through.
//
// Every wait reads the Supervisor's clock. The Layer's state is guarded by
// the Supervisor's lock; the order is the Supervisor's lock, then any
// lock of the ledger. docs/ledger.md has the contract for a ledger's
// author, and docs/model.md the model-checked form of the protocol.
package share
