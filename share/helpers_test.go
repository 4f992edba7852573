package share_test

// The vocabulary of the Supervisor's tests (internal/suptest).

import "github.com/crashloopguard/crashloop/internal/suptest"

var (
	testT0      = suptest.T0
	mockAt      = suptest.MockAt
	newRecorder = suptest.NewRecorder
	eventsOf    = suptest.EventsOf
	millis      = suptest.Millis
	restartEv   = suptest.RestartEv
	newShared   = suptest.NewShared
	layerOf     = suptest.LayerOf
)

type (
	supEvent = suptest.Event
	recorder = suptest.Recorder
)
