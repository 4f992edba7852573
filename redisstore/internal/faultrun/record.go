// Package faultrun is the randomized fault run of the shared-state protocol
// (docs/faults.md): replica processes (package replica) in network
// namespaces of their own share keys on a redis-server with AOF, a driver
// (TestFaultRun) injects faults on a seeded schedule, and Check reads
// every log and asserts the protocol's invariants.
package faultrun

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// Record is one line of a replica's log: a call of its Supervisor (a
// decision or a resume), an event its handler received, or a call of its
// ledger (the redisstore.Store it wraps) with what the server answered.
// Fields that do not apply to an Op are zero. It is a plain value.
type Record struct {
	T    int64  `json:"t"`              // when the call started (or the event came), Unix nanoseconds
	R    string `json:"r"`              // the replica
	Pid  int    `json:"pid"`            // the replica's process: a restarted replica has another
	Op   string `json:"op"`             // see the Op constants
	Key  string `json:"key,omitempty"`  //
	Took int64  `json:"took,omitempty"` // how long the call took, nanoseconds
	Err  string `json:"err,omitempty"`  // the call's error
	// InDoubt marks a ledger call that failed in a way that may have been
	// applied all the same (a timeout: the server may have run it).
	InDoubt bool `json:"in_doubt,omitempty"`

	Action string `json:"action,omitempty"` // OpDecide: restart, hold or stop
	Wait   int64  `json:"wait,omitempty"`   // OpDecide: the decision's wait, nanoseconds

	Kind   string `json:"kind,omitempty"`   // OpEvent: the event's dotted name
	Reason string `json:"reason,omitempty"` // OpEvent: its reason

	// Version: OpEvent, the transition whose claim this replica won just
	// before it announced the event (0: announced without a claim, i.e. a
	// park decided alone); OpClaim, the version claimed; OpJudge, OpLookup,
	// OpNotice, OpResumeCall, OpRestore: the key's version after the step
	// (the park's, the resume's).
	Version int64 `json:"version,omitempty"`
	// Park is the version of the key's park after the step (OpJudge,
	// OpLookup, OpNotice, OpRestore), of the park a resume cleared
	// (OpResumeCall), or of the park a decision returned (OpDecide: for a
	// park decided alone, the version of the last transition its replica
	// knew); 0
	// for none.
	Park int64 `json:"park,omitempty"`
	// Named is the version a resume or a write-back named.
	Named     int64 `json:"named,omitempty"`
	NewPark   bool  `json:"new_park,omitempty"`  // OpJudge: the step made the park
	Held      bool  `json:"held,omitempty"`      // OpJudge: the fleet breaker held the restart
	Now       int64 `json:"now,omitempty"`       // OpJudge: the time the server decided at, Unix nanoseconds
	Won       bool  `json:"won,omitempty"`       // OpClaim
	Written   bool  `json:"written,omitempty"`   // OpRestore
	Forgotten bool  `json:"forgotten,omitempty"` // OpNotice
	Changed   bool  `json:"changed,omitempty"`   // OpResumeCall: refused with a ChangedError
}

// The operations a Record logs.
const (
	OpStart      = "start"        // the replica started (Pid)
	OpStop       = "stop"         // the replica stopped on SIGTERM, after its last claim could be made
	OpDecide     = "decide"       // Supervisor.Decide of a failed run
	OpResume     = "resume"       // Supervisor.Resume
	OpEvent      = "event"        // an event the Supervisor's handler received
	OpJudge      = "judge"        // Ledger.Judge
	OpClaim      = "claim"        // Ledger.Claim
	OpResumeCall = "lresume"      // Ledger.Resume
	OpResumeSent = "lresume_sent" // Ledger.Resume is called (Named): a process killed in the call logs no OpResumeCall
	OpRestore    = "restore"      // Ledger.Restore: one Record a park written back (one with no key for none)
	OpLookup     = "lookup"       // Ledger.Lookup
	OpNotice     = "notice"       // a change the ledger told of (its notify)
	OpStall      = "stall"        // the replica's process was not scheduled from T for Took
)

// Log writes Records to a file, one JSON line each, with one write call
// a line, so that a process killed with SIGKILL leaves whole lines. It is
// safe for concurrent use. The zero value is not usable: get one from
// OpenLog.
type Log struct {
	mu sync.Mutex
	f  *os.File
}

// OpenLog opens path for appending, making it if needed.
func OpenLog(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Log{f: f}, nil
}

// Write logs r.
func (l *Log) Write(r Record) {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a Record always marshals
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(b)
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

// ReadLog reads every Record of the file at path.
func ReadLog(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}
