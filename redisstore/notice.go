package redisstore

import (
	"errors"
	"net"
	"os"
	"time"

	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
)

// How the notice subscription stays healthy. A subscription that heard
// nothing for pingEvery is pinged; one that does not answer within another
// pingEvery (a black hole) is dropped, and a dropped or failed one is made
// again after resubscribePause. Each decision reads the shared state
// anyway: a notice that is late or lost delays nothing but a refusal that
// this replica could have made without asking.
const (
	pingEvery        = time.Second
	resubscribePause = time.Second
)

// listen keeps a subscription to the deployment's notices until Close, and
// tells notify of the changes other replicas make.
func (s *Store) listen() {
	defer s.wg.Done()
	for {
		ps := s.rdb.SSubscribe(s.ctx, s.keys.events())
		s.mu.Lock()
		closed := s.closed
		if !closed {
			s.ps = ps
		}
		s.mu.Unlock()
		if !closed {
			s.receive(ps)
		}
		s.mu.Lock()
		s.ps = nil
		s.mu.Unlock()
		_ = ps.Close()
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(resubscribePause):
		}
	}
}

// receive reads the notices of one subscription until it fails or the Store
// closes. Each (re)subscription is followed by a reconcile, retried at each
// ping until it succeeds. Every pingEvery it also checks the deployment's
// epoch (see checkEpoch), so that a server that lost its state is found
// within about a second even while this replica makes no call.
func (s *Store) receive(ps *redis.PubSub) {
	pinged, stale := false, false
	checked := time.Now()
	for {
		if time.Since(checked) >= s.epochs {
			s.checkEpoch(s.ctx)
			checked = time.Now()
		}
		msg, err := ps.ReceiveTimeout(s.ctx, pingEvery)
		if s.ctx.Err() != nil {
			return
		}
		if err != nil {
			if !isTimeout(err) || pinged {
				return
			}
			if ps.Ping(s.ctx) != nil {
				return
			}
			pinged = true
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "sunsubscribe" || m.Kind == "unsubscribe" {
				// The server dropped the subscription (its slot moved to
				// another node): go-redis keeps the channel on its list
				// and the connection, so a new subscription is made.
				return
			}
			stale = true
		case *redis.Pong:
			pinged = false
		case *redis.Message:
			pinged = false
			s.hear(m.Payload)
		}
		if stale {
			stale = !s.reconcile()
		}
	}
}

// isTimeout reports whether err is a read that timed out.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// hear takes a notice and tells notify of it, a change this Store made
// included: a call of this Store that gave up (timed out, cancelled) may
// still have been applied, and its Supervisor learns the outcome so. The
// Supervisor takes a change only if its version is newer than the one it
// knows, so a notice told twice, late or out of order changes nothing.
//
// A notice names the epoch it was made in. One of another epoch than this
// Store's makes it check the deployment's epoch at once (a notice made
// after the server lost its state comes before this replica's next call,
// and its version must not be compared with the versions of the state
// lost): the Supervisor is told of the loss first, then of the notice if
// it is of the epoch adopted. A notice of an epoch that is no longer the
// deployment's (made before a loss) is dropped.
func (s *Store) hear(msg string) {
	ch, epoch, _, ok := decodeNotice(msg)
	if !ok {
		return
	}
	s.mu.Lock()
	known := s.epoch
	s.mu.Unlock()
	if known != "" && epoch != known {
		s.checkEpoch(s.ctx)
		s.mu.Lock()
		known = s.epoch
		s.mu.Unlock()
		if epoch != known {
			return
		}
	}
	s.saw(ch.Version)
	s.believe(ch.Key, ch.Park != nil)
	s.notify(ch)
}

// reconcile reads the parks that stand, with their versions, and tells
// notify of them and of the keys this Store held as parked that no longer
// are (with their versions, from a lookup each): the notices published
// while the subscription was down are lost (pub/sub is at most once). It
// reports whether it could read them.
func (s *Store) reconcile() bool {
	parks, err := s.Parked(s.ctx)
	if err != nil {
		s.lossFound(err) // a loss of state found here is the Supervisor's
		return false
	}
	var changes []share.Change
	var gone []string
	s.mu.Lock()
	standing := make(map[string]struct{}, len(parks))
	for _, pe := range parks {
		standing[pe.Key] = struct{}{}
		s.known[pe.Key] = struct{}{}
		changes = append(changes, share.Change{Key: pe.Key, Version: pe.Version, Park: pe})
	}
	for key := range s.known {
		if _, ok := standing[key]; !ok {
			gone = append(gone, key)
		}
	}
	s.mu.Unlock()
	for _, key := range gone { // resumed or forgotten: at which version?
		ch, err := s.Lookup(s.ctx, key)
		if err != nil {
			s.lossFound(err)
			return false
		}
		if ch.Park == nil {
			s.believe(key, false)
		}
		changes = append(changes, ch)
	}
	// every park that stands is told, whether or not this Store told of it
	// before: the Supervisor takes those newer than what it knows
	for _, ch := range changes {
		s.notify(ch)
	}
	s.reconciled.Add(1)
	return true
}
