package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
)

// The causes of a MisconfiguredError.
const (
	// CauseAuth: the server refused the credentials (WRONGPASS, NOAUTH).
	CauseAuth = "auth"
	// CausePermission: the ACL user may not run a command, touch a key or
	// publish on the channel the store needs (NOPERM).
	CausePermission = "noperm"
	// CauseEviction: the server has a maxmemory and a maxmemory-policy
	// other than noeviction, so it may evict the store's keys.
	CauseEviction = "eviction"
	// CauseOOM: the server is at its maxmemory and refuses writes (OOM).
	CauseOOM = "oom"
	// CauseMoved: the client is a plain one on a cluster node that does not
	// own the deployment's slot (MOVED).
	CauseMoved = "moved"
	// CauseFormat: the deployment holds a record or a fleet string written
	// by a build of redisstore of another format: replicas of two such
	// builds must not share a deployment (prefix).
	CauseFormat = "format"
)

// checkEvery is how often an open Store checks the server's configuration
// again (maxmemory, maxmemory-policy, channel permission): a CONFIG GET and
// an SPUBLISH of an empty notice, cheap.
const checkEvery = 10 * time.Second

// MisconfiguredError is the error of a call that failed, or was refused, for
// a misconfiguration of the server or of the client that no retry fixes: a
// refused password, a missing ACL permission, an eviction policy that may
// drop the store's keys, a full server, a plain client on the wrong cluster
// node. It matches share.ErrMisconfigured (errors.Is), so a
// Supervisor announces store.misconfigured, naming Cause, instead of
// store.unavailable; it also matches the server's error when there is one.
// It is a plain value, safe to share.
type MisconfiguredError struct {
	// Cause is one of CauseAuth, CausePermission, CauseEviction, CauseOOM
	// and CauseMoved.
	Cause string
	// Detail says what is wrong and what to change.
	Detail string
	// Err is the server's error, nil for a finding of the store's own
	// check (an eviction policy).
	Err error
}

// Error returns the cause, the detail and the server's error.
func (e *MisconfiguredError) Error() string {
	msg := "redisstore: Redis is misconfigured for the store (" + e.Cause + "): " + e.Detail
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// StoreCause returns Cause: the Supervisor announces each cause once.
func (e *MisconfiguredError) StoreCause() string { return e.Cause }

// Unwrap returns share.ErrMisconfigured and the server's error.
func (e *MisconfiguredError) Unwrap() []error {
	if e.Err == nil {
		return []error{share.ErrMisconfigured}
	}
	return []error{share.ErrMisconfigured, e.Err}
}

// classify returns the MisconfiguredError of a server's error that no retry
// fixes, or err itself.
func (s *Store) classify(err error) error {
	if err == nil {
		return nil
	}
	var me *MisconfiguredError
	if errors.As(err, &me) {
		return err
	}
	mis := func(cause, detail string) error { return &MisconfiguredError{Cause: cause, Detail: detail, Err: err} }
	switch {
	case redis.IsAuthError(err):
		return mis(CauseAuth, "the server refused the credentials: check the user and password of the URL (or $REDIS_PASSWORD)")
	case redis.IsPermissionError(err), strings.Contains(err.Error(), "The user executing the script can't"):
		return mis(CausePermission, s.permissions())
	case redis.IsOOMError(err):
		return mis(CauseOOM, "the server is at its maxmemory and refuses writes: raise maxmemory (the store's keys must never be evicted)")
	}
	if strings.Contains(err.Error(), "crashloop: record_format") {
		return mis(CauseFormat, "a record of the deployment was written by a build of redisstore of another record format: give this build its own prefix, or delete the deployment's keys {prefix}:k:*")
	}
	if strings.Contains(err.Error(), "crashloop: fleet_format") {
		return mis(CauseFormat, "the deployment's fleet string was written by a build of redisstore of another format: give this build its own prefix, or delete the deployment's key {prefix}:fleet")
	}
	if _, ok := redis.IsMovedError(err); ok {
		return mis(CauseMoved, "the server is a Redis Cluster node that does not own the deployment's slot: use a cluster client (NewClient makes one for a cluster)")
	}
	return err
}

// permissions says which ACL permissions the store needs.
func (s *Store) permissions() string {
	return "the ACL user needs the commands EVALSHA, EVAL, FCALL, FUNCTION LOAD, SPUBLISH, SSUBSCRIBE, PING, SET (after a full server) and CONFIG GET (optional), the keys ~" +
		s.keys.tag + "* and the channel &" + s.keys.events()
}

// writes reports whether op changes the shared state, so that a standing
// misconfiguration refuses it.
func writes(op string) bool {
	switch op {
	case "judge", "proceed", "restore", "resume", "forget":
		return true
	}
	return false
}

// check asks the server whether it keeps what the store needs: that it
// cannot evict the store's keys (no maxmemory, or maxmemory-policy
// noeviction) and that this user may publish on the deployment's channel.
// It returns the misconfiguration it finds (nil: none), and a warning when
// it could not tell (CONFIG GET refused, as on managed services), or the
// error of a server that did not answer.
func (s *Store) check(ctx context.Context) (mis *MisconfiguredError, warning string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	if err := s.rdb.SPublish(ctx, s.keys.events(), "").Err(); err != nil {
		var me *MisconfiguredError
		if errors.As(s.classify(err), &me) {
			return me, "", nil
		}
		return nil, "", err
	}
	cfg, err := s.rdb.ConfigGet(ctx, "maxmemory*").Result()
	if err != nil {
		if redis.IsPermissionError(err) || strings.Contains(strings.ToLower(err.Error()), "unknown command") {
			return nil, "redisstore: cannot read the server's maxmemory and maxmemory-policy (CONFIG GET refused): make sure maxmemory is 0 or maxmemory-policy is noeviction, or the server may evict parks and windows", nil
		}
		var me *MisconfiguredError
		if errors.As(s.classify(err), &me) {
			return me, "", nil
		}
		return nil, "", err
	}
	return evictionRisk(cfg["maxmemory"], cfg["maxmemory-policy"]), "", nil
}

// evictionRisk returns the misconfiguration of a server with maxmemory and
// policy, or nil. Only noeviction is safe under a maxmemory: the allkeys-*
// policies evict parks too, and the volatile-* ones evict every key with a
// TTL, which are the records of keys not parked (their windows: a replica
// then grants restarts its budget had spent) and the fleet breaker while
// it is not tripped.
func evictionRisk(maxmemory, policy string) *MisconfiguredError {
	n, _ := strconv.ParseInt(maxmemory, 10, 64)
	if n == 0 || policy == "noeviction" || policy == "" {
		return nil
	}
	return &MisconfiguredError{Cause: CauseEviction, Detail: "maxmemory is " + maxmemory + " with maxmemory-policy " + policy +
		", which may evict the store's parks and windows: set maxmemory-policy noeviction (or maxmemory 0)"}
}

// watch checks the server at Open and every checkEvery until Close, and
// keeps what it found for run: a misconfiguration refuses every step that
// writes until a check finds it gone.
func (s *Store) watch() {
	defer s.wg.Done()
	t := time.NewTicker(s.checks)
	defer t.Stop()
	for {
		mis, _, err := s.check(s.ctx)
		if err == nil {
			s.setFound(mis)
			s.checked.Store(true)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setFound keeps the misconfiguration the last check found (nil: none).
func (s *Store) setFound(mis *MisconfiguredError) {
	s.found.Store(mis)
}

// gate returns the misconfiguration that refuses op, if any: the last
// check's finding (an opened Store's first write that comes before its
// first check checks first, within the call's time), or a full server (OOM) that refused a write, until a
// write goes through again. A server that refused a write for lack of
// memory answers read-only steps (and a Restore of nothing), so without
// this gate a Supervisor would read such a step as a recovery and the next
// decision as a new failure, every second.
func (s *Store) gate(ctx context.Context, op string) error {
	if !writes(op) {
		return nil
	}
	if !s.checked.Load() && s.plan.Load() != nil {
		// The first write of an opened Store before its first check ended:
		// check now, so that not even the first park is half made.
		if mis, _, err := s.check(ctx); err == nil {
			s.setFound(mis)
			s.checked.Store(true)
		}
	}
	if mis := s.found.Load(); mis != nil {
		return mis
	}
	if mis := s.full.Load(); mis != nil {
		// A write of its own tells whether the server takes writes again.
		ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
		defer cancel()
		if err := s.rdb.Set(ctx, s.keys.tag+"probe", "1", time.Second).Err(); err != nil {
			if redis.IsOOMError(err) {
				return mis
			}
			return s.classify(err)
		}
		s.full.Store(nil)
	}
	return nil
}

// Check asks the server once, now, whether it keeps what the store needs
// (it cannot evict the store's keys; this user may publish on the
// deployment's channel). It returns a *MisconfiguredError for what it
// finds, nil when all is well, and a warning (with a nil error) when the
// server would not say (CONFIG GET refused). An open Store checks on its
// own, at Open and every 10s, and refuses every step that writes while a
// misconfiguration stands; Check is for a program's start, to log the
// result. It is safe for concurrent use.
func (s *Store) Check(ctx context.Context) (warning string, err error) {
	if s.err != nil {
		return "", s.err
	}
	mis, warning, err := s.check(ctx)
	if err != nil {
		return "", err
	}
	if mis != nil {
		return "", mis
	}
	return warning, nil
}

// CallTimeout returns Options.Timeout: a Supervisor bounds each whole
// decision (a write-back and a judge step) by it, not each call. It is safe
// for concurrent use.
func (s *Store) CallTimeout() time.Duration { return s.o.Timeout }
