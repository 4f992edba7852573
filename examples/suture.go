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
// the key, the reason and the last failure). After sup.Resume(ctx, key), add a new
// service for the key: suture does not take a removed service back.
//
// A clean exit (fn returns nil) ends supervision in crashloop unless the
// config has RestartOnCleanExit; Wrap then returns the refusal,
// suture.ErrDoNotRestart, so suture does not restart it either.
func NewSutureService(sup *crashloop.Supervisor, key string, fn func(ctx context.Context) error) suture.Service {
	return &sutureService{key: key, serve: sup.Wrap(key, fn, crashloop.WithRefusal(suture.ErrDoNotRestart))}
}

type sutureService struct {
	key   string
	serve func(ctx context.Context) error
}

// Serve runs fn once under crashloop and tells suture whether to restart it.
func (s *sutureService) Serve(ctx context.Context) error { return s.serve(ctx) }

// String names the service in suture's events: the key.
func (s *sutureService) String() string { return s.key }
