package share

import (
	"errors"
	"fmt"

	"github.com/crashloopguard/crashloop"
)

// Errors of a layer and of a Ledger. Test for them with errors.Is.
var (
	// ErrUnavailable is matched by the errors of a Layer that cannot reach
	// its Ledger for a step that must not be done alone, such as a resume:
	// a resume that only this replica knew of would not apply everywhere.
	ErrUnavailable = errors.New("crashloop: shared store unavailable")
	// ErrMisconfigured is matched by a Ledger's errors that no retry fixes:
	// refused credentials, a missing permission, a store that may evict the
	// state, or a full one. The layer announces EventStoreMisconfigured
	// once per cause (a method StoreCause() string names it, else the
	// error's text) and decides alone until the ledger answers again.
	ErrMisconfigured = errors.New("crashloop: shared store misconfigured")
	// ErrChanged is matched by every *ChangedError.
	ErrChanged = errors.New("crashloop: key changed since the version named")
	// ErrStateLost is matched by every *StateLostError.
	ErrStateLost = errors.New("crashloop: shared store lost its state")
)

// ReasonFailover is the Reason of an EventStoreStateLost whose server kept
// its state but lost its last acknowledged writes (a failover to a replica
// they had not reached). A loss with no reason is a state gone or replaced.
const ReasonFailover = "failover"

// StateLostError is a shared ledger's refusal of a call because its server
// lost the state the ledger knew (a failover that lost writes, a flush, a
// restart without persistence): the call changed nothing. A ledger that
// finds a loss outside a call (a periodic check, a notice) tells it in
// Change.StateLost instead. errors.Is(err, ErrStateLost) holds. It
// is a plain value.
type StateLostError struct {
	// Announce is set for exactly one replica of a deployment for each
	// loss: the one that announces crashloop.EventStoreStateLost. A ledger whose
	// claim of the announcement could not be sent at once may tell the
	// same loss (the same Epoch) again later, with Announce set.
	Announce bool
	// Epoch names the state the ledger found and adopted, so that a
	// Supervisor writes back once for each loss however many times it is
	// told of it; "" for a ledger that does not name its states (each
	// report is then a loss of its own).
	Epoch string
	// Reason says what lost the state: "" when the ledger found the state
	// gone or replaced (a flush, a restart without persistence),
	// ReasonFailover when the server kept it but lost its last
	// acknowledged writes (a failover to a replica they had not reached).
	// crashloop.EventStoreStateLost carries it.
	Reason string
}

// Error says that the state was lost.
func (e *StateLostError) Error() string { return ErrStateLost.Error() }

// Is matches ErrStateLost.
func (e *StateLostError) Is(target error) bool { return target == ErrStateLost }

// ChangedError is a shared ledger's refusal of a resume, forget or
// write-back that named a version of Key other than the key's current one:
// something happened to the key since its caller learnt of it, and the step
// changed nothing. It carries the key as it stands: its current Version and
// its Park (nil when it is not parked). errors.Is(err, ErrChanged) holds,
// and so does errors.Is(err, crashloop.ErrNotParked) when the key is not parked.
type ChangedError struct {
	Key     string
	Version int64
	Park    *crashloop.ParkedError
}

// Error names the key, its current version and whether it is parked.
func (e *ChangedError) Error() string {
	if e.Park == nil {
		return fmt.Sprintf("share: key %q changed (now at version %d, not parked)", e.Key, e.Version)
	}
	return fmt.Sprintf("share: key %q changed (now at version %d, parked: %s)", e.Key, e.Version, e.Park.Reason)
}

// Is matches ErrChanged, and ErrNotParked for a key that is not parked.
func (e *ChangedError) Is(target error) bool {
	return target == ErrChanged || (target == crashloop.ErrNotParked && e.Park == nil)
}
