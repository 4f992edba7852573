package redisstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/crashloopguard/crashloop/share"
)

// The fleet's members. Each replica keeps, in the set {p}:m:REPLICA, the
// keys its Supervisor counts as fleet members (share.Ledger.Member);
// the fleet breaker's failing fraction counts the keys of every live
// replica's set, each once (fleetKeys in store.lua). The Store writes its
// set, one write at a time and in order: the changes since the last write
// (or the whole set, when what the server holds is unknown), at once from
// its refresher when a change is made, before a Judge or Fleet that would
// count them, and every MemberTTL/3 to keep the set alive; at Close it
// withdraws the set.

// Member records whether this replica counts key as a fleet member, for
// the Store to write (see the Options' MemberTTL): it does no I/O and wakes
// the refresher. Without a fleet breaker, before Open and after Close it
// does nothing. It is safe for concurrent use.
func (s *Store) Member(key string, member bool) {
	s.mu.Lock()
	if s.mine == nil || s.closed {
		s.mu.Unlock()
		return
	}
	if _, had := s.mine[key]; had == member {
		s.mu.Unlock()
		return
	}
	if member {
		s.mine[key] = struct{}{}
	} else {
		delete(s.mine, key)
	}
	s.pending[key] = member
	s.mu.Unlock()
	select {
	case s.poke <- struct{}{}:
	default: // a write is due already
	}
}

// membersFirst writes the changes of members not yet written before a step
// of the Supervisor that counts them (Judge, Fleet). Only the server's loss
// of its state fails the step, when this write found it: it is the step's
// own error, and its Supervisor writes back the parks it knows. Any other
// failure shows in the step itself, or is made good by the next write.
func (s *Store) membersFirst(ctx context.Context) error {
	err := s.writeMembers(ctx, false)
	if _, ok := errors.AsType[*share.StateLostError](err); ok {
		return err
	}
	return nil
}

// lossFound takes a loss of state that a call of the Store's own found
// (the refresher's, the reconcile's: it adopted the deployment's new
// epoch, so the Supervisor's next step would not find it). The Store told
// its Supervisor when it adopted the epoch (see lostState), which wrote
// back at once; when the call won the loss's claim, the Supervisor is told
// to announce it.
func (s *Store) lossFound(err error) {
	if sl, ok := errors.AsType[*share.StateLostError](err); ok && sl.Announce {
		s.tellLost(sl)
	}
}

// writeMembers writes this replica's members: the changes since the last
// write, or the whole set when what the server holds is unknown (at first,
// after a failed write, when the server's set expired, or after the server
// lost its state).
// Without always, it writes only when there is something to write.
func (s *Store) writeMembers(ctx context.Context, always bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for range 2 { // a set found expired or lost is written whole at once
		s.mu.Lock()
		if s.mine == nil || s.closed {
			s.mu.Unlock()
			return nil
		}
		full := s.written < 0
		if !full && !always && len(s.pending) == 0 {
			s.mu.Unlock()
			return nil
		}
		var add, remove []string
		if full {
			add = slices.Sorted(maps.Keys(s.mine))
		} else {
			for key, m := range s.pending {
				if m {
					add = append(add, key)
				} else {
					remove = append(remove, key)
				}
			}
		}
		expect := s.written
		clear(s.pending)
		s.written = -1 // unknown until the write's reply
		s.mu.Unlock()
		n, applied, err := s.sendMembers(ctx, full, expect, add, remove)
		if err != nil {
			return err
		}
		if applied {
			s.mu.Lock()
			s.written = n
			s.mu.Unlock()
			return nil
		}
	}
	return nil
}

// sendMembers runs the members step: with full, the set is add; else add
// and remove change it if it holds expect keys. It returns the keys the
// set holds after the step, and whether it wrote.
func (s *Store) sendMembers(ctx context.Context, full bool, expect int, add, remove []string) (int, bool, error) {
	args := make([]any, 0, 5+len(add)+len(remove))
	args = append(args, s.o.Replica, ttlMillis(s.o.MemberTTL), boolArg(full), max(expect, 0), len(add))
	for _, key := range add {
		args = append(args, key)
	}
	for _, key := range remove {
		args = append(args, key)
	}
	res, err := s.run(ctx, "members", []string{s.keys.member(s.o.Replica), s.keys.replicas()}, args...)
	if err != nil {
		return 0, false, err
	}
	o, err := readObject(res, "applied", "count")
	if err != nil {
		return 0, false, badReply("members", err)
	}
	f := fields{o: o}
	applied, n := f.flag("applied"), f.int("count")
	if f.err != nil {
		return 0, false, badReply("members", f.err)
	}
	return int(n), applied, nil
}

// membersLost is told that the server lost its state, and this replica's
// members with it: the refresher writes them whole at once.
func (s *Store) membersLost() {
	s.mu.Lock()
	s.written = -1
	s.mu.Unlock()
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// refresh writes this replica's members until Close: each change at once,
// and the whole of them every interval, so that they live while it does.
func (s *Store) refresh(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(max(every, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.poke:
			s.lossFound(s.writeMembers(s.ctx, false))
		case <-t.C:
			s.lossFound(s.writeMembers(s.ctx, true))
		}
	}
}

// withdraw takes this replica's members off the deployment, at Close.
func (s *Store) withdraw() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	had := s.mine != nil
	s.mine, s.pending = nil, nil
	s.mu.Unlock()
	if !had {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.o.Timeout)
	defer cancel()
	_, _, _ = s.sendMembers(ctx, true, 0, nil, nil)
}
