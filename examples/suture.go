package examples

import (
	"context"

	"github.com/crashloopguard/crashloop"
	"github.com/thejerf/suture/v4"
)

// NewSutureService returns fn as a suture v4 service whose restarts sup
// judges under key. Add it to a suture supervisor as any other service.
//
// Suture restarts a service whenever Serve returns, forever: its own
// failure backoff (5 failures, then a 15s pause) slows a crash loop down but
// never stops it. Here each Serve is one run of fn through sup.Wrap: after a
// failed start Serve sleeps crashloop's backoff before it returns, so suture
// restarts fn when the budget says; once the budget is spent the key is
// parked, and Serve returns an error that matches both suture.ErrDoNotRestart
// (suture removes the service) and *crashloop.ParkedError (errors.As gives
// the key, the reason and the last failure). After sup.Resume(key), add a new
// service for the key: suture does not take a removed service back.
//
// A clean exit (fn returns nil) ends supervision in crashloop unless the
// config has RestartOnCleanExit; suture would restart it, so Serve then
// returns suture.ErrDoNotRestart too. With RestartOnCleanExit, suture
// restarts it and crashloop judges the restart (a clean exit before the run
// was healthy is a failed start).
func NewSutureService(sup *crashloop.Supervisor, key string, fn func(ctx context.Context) error) suture.Service {
	return &sutureService{sup: sup, key: key, fn: fn, restartOnCleanExit: sup.Config().RestartOnCleanExit}
}

type sutureService struct {
	sup                *crashloop.Supervisor
	key                string
	fn                 func(ctx context.Context) error
	restartOnCleanExit bool
}

// Serve runs fn once under crashloop and tells suture whether to restart it.
func (s *sutureService) Serve(ctx context.Context) error {
	// Wrap returns nil both after a clean exit, which ends supervision, and
	// for a planned restart (fn returned crashloop.Restart(nil)), which suture
	// must carry out: what fn returned tells the two apart.
	exited := false
	err := s.sup.Wrap(s.key, func(ctx context.Context) error {
		err := s.fn(ctx)
		exited = err == nil
		return err
	}, crashloop.WithRefusal(suture.ErrDoNotRestart))(ctx)
	if err == nil && exited && !s.restartOnCleanExit {
		return suture.ErrDoNotRestart
	}
	return err
}

// String names the service in suture's events: the key.
func (s *sutureService) String() string { return s.key }
