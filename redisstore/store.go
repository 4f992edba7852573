package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
)

// Options configures a Store. Every field is optional: the zero value is
// all defaults. It is a plain value.
type Options struct {
	// Prefix is the deployment's name: every key is "{Prefix}:...", one
	// hash tag, so every step is legal on Redis Cluster, and deployments
	// with different prefixes share a server without sharing state. It
	// must not hold { or }. Default "crashloop".
	Prefix string
	// Timeout is the longest one call waits for Redis: each call runs under
	// context.WithTimeout(ctx, Timeout). Give the client the same bound
	// (NewClient and BoundedOptions do), so that a dial or a read cannot
	// outlast it either. Default DefaultTimeout (300ms).
	Timeout time.Duration
	// ClientTime decides at the time the caller gives (the Judgment's, the
	// Supervisor's clock) instead of the server's TIME. It is
	// skew-sensitive: replicas whose clocks disagree count each other's
	// restarts as older or younger than they are. Use it for servers that
	// forbid TIME in scripts, and for tests with explicit times. Default
	// false: the server's clock, one clock for every replica.
	ClientTime bool
	// Replica is this replica's name in the fleet's members ({p}:m:REPLICA);
	// each replica of a deployment needs its own. Default: the hostname,
	// the process id and a random suffix.
	Replica string
	// MemberTTL is how long the keys this replica counts as fleet members
	// (share.Ledger.Member) count after their last write, so that a
	// replica that dies stops counting in the failing fraction; the Store
	// keeps them alive while it is open (every MemberTTL/3, between Open and
	// Close) and withdraws them at Close. It must be 0 or at least 1ms.
	// Default 1m (DefaultMemberTTL).
	MemberTTL time.Duration
}

// DefaultPrefix is the Prefix of Options that set none.
const DefaultPrefix = "crashloop"

// DefaultMemberTTL is the MemberTTL of Options that set none.
const DefaultMemberTTL = time.Minute

// ttlGrace is added to the span of every key's TTL: a key expires this long
// after everything it holds has aged out of its windows.
const ttlGrace = time.Minute

// Store is a share.Ledger on Redis: the guard state of every key of a
// deployment (windows, chains, restart counts, parks, held restarts) and
// its fleet breaker, shared by every replica that uses the same server and
// Prefix. Each method is one atomic step on the server (one Lua script) and
// waits at most Options.Timeout.
//
// Judge and Proceed need Open (a Supervisor opens its ledger with its
// configuration). Lookup, Parked, Resume, Forget, Restore and Fleet work
// without it, for operator tools that know no configuration: Fleet then
// reports what the deployment stored (tripped, since and rearm time,
// counts, with the limit and cooldown its replicas last wrote) and reads
// the time without raising the deployment's latest time.
//
// A Store is used by one Supervisor (one replica) and is safe for
// concurrent use. Create one with New; the zero value is not usable. Close
// it when done.
type Store struct {
	rdb     redis.UniversalClient
	script  *program    // the package's script; tests give another
	scripts atomic.Bool // the server knows no functions: every step is a script
	o       Options
	keys    keyspace
	err     error  // an invalid Prefix: every method returns it
	origin  string // this Store's name in notices, to tell its own apart

	plan    atomic.Pointer[plan]               // set by Open
	found   atomic.Pointer[MisconfiguredError] // the last check's finding (check.go)
	full    atomic.Pointer[MisconfiguredError] // a write refused for lack of memory, until one goes through
	checked atomic.Bool                        // a check has found what it could
	checks  time.Duration                      // how often watch checks: checkEvery; tests shorten it before Open
	epochs  time.Duration                      // how often receive checks the epoch: pingEvery; tests change it before Open

	mu     sync.Mutex
	opened bool
	closed bool
	notify func(share.Change)
	known  map[string]struct{} // keys this Store told its Supervisor are parked
	epoch  string              // the deployment's epoch, once learnt
	fresh  string              // the epoch this Store makes for a deployment that has none
	seen   int64               // the highest version this Store saw in its epoch (see checkEpoch)
	floor  int64               // the highest version it saw in the epochs before
	ps     *redis.PubSub       // the notice subscription, while there is one

	// The keys this replica counts as fleet members (members.go), kept
	// with a fleet breaker only (mine is nil without).
	mine    map[string]struct{}
	pending map[string]bool // changes of mine not yet written: true added, false removed
	written int             // the keys the server's set holds after the last write; -1: unknown, write it whole
	wmu     sync.Mutex      // one write of the members at a time, in order
	poke    chan struct{}   // wakes the refresher to write a change

	reconciled atomic.Int64 // reconciles done, one after each (re)subscription: the tests wait for them

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Store on client (a *redis.Client, *redis.ClusterClient or
// any redis.UniversalClient) with options o. It does no I/O: a server that
// cannot be reached shows in the first call. An invalid Prefix is returned
// by every method.
func New(client redis.UniversalClient, o Options) *Store {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Replica == "" {
		o.Replica = defaultReplica()
	}
	ks, err := newKeyspace(o.Prefix)
	switch {
	case err != nil:
	case o.MemberTTL < 0 || (o.MemberTTL > 0 && o.MemberTTL < time.Millisecond):
		err = fmt.Errorf("redisstore: Options.MemberTTL %v: must be 0 (the default, %v) or at least 1ms", o.MemberTTL, DefaultMemberTTL)
	case o.MemberTTL == 0:
		o.MemberTTL = DefaultMemberTTL
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Store{rdb: client, script: script, o: o, keys: ks, err: err, origin: randomSuffix(8), fresh: randomSuffix(16),
		known: map[string]struct{}{}, ctx: ctx, cancel: cancel, checks: checkEvery, epochs: pingEvery,
		poke: make(chan struct{}, 1)}
}

func defaultReplica() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + randomSuffix(4)
}

func randomSuffix(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// plan is what Open makes of a Supervisor's configuration: the
// configuration as the script keeps it (readConfig in store.lua), stored
// once under its digest, which the steps that judge name as their last key.
type plan struct {
	cfg    crashloop.SupervisorConfig
	config string // 21 big-endian numbers of 8 bytes: the format's version, then the values
	key    string // {p}:cfg:DIGEST, where it is stored
}

// newPlan turns cfg into the script's configuration, or an error for a
// configuration the script cannot keep exactly.
func newPlan(cfg crashloop.SupervisorConfig, ks keyspace) (*plan, error) {
	span := cfg.Budget.Window
	var cmax, cgap, gmax, gwin, rph, minf, cdus, cdns int64
	frac := 1.0
	if c := cfg.Chain; c != nil {
		cmax, cgap, span = int64(c.MaxChain), micros(c.ResetGap), max(span, c.ResetGap)
	}
	if c := cfg.Guard; c != nil {
		gmax, gwin, span = int64(c.MaxRestarts), micros(c.Window), max(span, c.Window)
	}
	if cfg.HourlyCap > 0 {
		span = max(span, time.Hour)
	}
	// the probe after a park and the hold on a shared cause, in ns (0: off)
	var probeAfter, probeMax, healthy, causeKeys, causeWindow, probeEvery int64
	if cfg.ProbeAfter > 0 {
		probeAfter, probeMax = int64(cfg.ProbeAfter), int64(cfg.ProbeMax)
		if probeMax == 0 { // the library's default: 16 x ProbeAfter
			probeMax = int64(min(cfg.ProbeAfter, math.MaxInt64/16) * 16)
		}
	}
	if c := cfg.Fleet; c != nil && c.SharedCause != nil {
		sc := *c.SharedCause
		causeKeys, causeWindow, probeEvery = int64(cmp.Or(sc.Keys, 3)), int64(cmp.Or(sc.Window, time.Minute)),
			int64(cmp.Or(sc.ProbeEvery, 30*time.Second))
		span = max(span, time.Duration(probeEvery)) // a released restart leaves within one probe_every
	}
	if probeAfter > 0 || causeKeys > 0 {
		healthy = int64(cfg.HealthyAfter)
	}
	for _, d := range []int64{probeAfter, probeMax, healthy, causeWindow, probeEvery} {
		if d >= maxExact {
			return nil, fmt.Errorf("redisstore: a probe or shared cause setting of %v: must be below %v",
				time.Duration(d), time.Duration(maxExact))
		}
	}
	fspan := span
	if c := cfg.Fleet; c != nil {
		if c.Cooldown >= maxExact {
			return nil, fmt.Errorf("redisstore: fleet cooldown %v: must be below %v", c.Cooldown, time.Duration(maxExact))
		}
		rph, minf, cdus, cdns = int64(c.RestartsPerHour), int64(c.MinFailing), microsUp(c.Cooldown), int64(c.Cooldown)
		frac = c.FailingFraction
		// a held restart waits out the cooldown, then its turn in the
		// release (at most one more cooldown)
		span = max(span, 2*c.Cooldown)
		fspan = max(span, time.Hour+c.Cooldown, time.Duration(causeWindow)) // the causes' notes last a window
	}
	for _, d := range []time.Duration{cfg.Budget.Window, span, fspan} {
		if micros(d) >= maxExact || d < 0 || d > math.MaxInt64/2 {
			return nil, fmt.Errorf("redisstore: a window of %v: too long to keep", d)
		}
	}
	b := binary.BigEndian.AppendUint64(nil, configFormat)
	for _, v := range []int64{int64(cfg.Budget.MaxRespawns), micros(cfg.Budget.Window), cmax, cgap, gmax, gwin,
		int64(cfg.HourlyCap), rph, cdus, cdns} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(frac))
	for _, v := range []int64{minf, ttlMillis(span + ttlGrace), ttlMillis(fspan + ttlGrace), probeAfter, probeMax, healthy,
		causeKeys, causeWindow, probeEvery} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	sum := sha1.Sum(b)
	return &plan{cfg: cfg, config: string(b), key: ks.config(hex.EncodeToString(sum[:8]))}, nil
}

// configFormat is the version of the configuration's format, its first
// number: a script that reads another refuses it.
const configFormat = 2

// Open binds the Store to the configuration of the Supervisor that uses
// it, once. When notify is not nil it subscribes to the deployment's
// notices and calls notify (from its own goroutine) for each park, resume
// or forget of a parked key that another replica makes, a park written back
// by Restore included; on every (re)subscription it also compares the
// parks it told of with the parks that stand, and tells the differences, so
// a notice lost while disconnected is made good. With a fleet breaker it
// keeps this replica's fleet members (see Member) alive until Close. It checks the
// server's configuration at once and every 10s (see Check): while a
// misconfiguration stands, every step that writes fails with it. Open does
// no I/O itself: an unreachable server does not keep a Supervisor from
// starting. The first step that judges stores the configuration on the
// server, under its digest, and so does the next one after the server lost
// it; no step sends it. It fails for an invalid Prefix, a second Open, a closed Store, and a
// configuration the script cannot keep exactly (a fleet cooldown of 104
// days or more, a window of 285 years or more).
func (s *Store) Open(cfg crashloop.SupervisorConfig, notify func(share.Change)) error {
	if s.err != nil {
		return s.err
	}
	p, err := newPlan(cfg, s.keys)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("redisstore: Open: the Store is closed")
	case s.opened:
		return errors.New("redisstore: Open: the Store is open already; each Supervisor needs a Store of its own")
	}
	s.opened, s.notify = true, notify
	s.plan.Store(p)
	s.wg.Add(1)
	go s.watch()
	if notify != nil {
		s.wg.Add(1)
		go s.listen()
	}
	if cfg.Fleet != nil {
		s.mine, s.pending, s.written = map[string]struct{}{}, map[string]bool{}, -1
		s.wg.Add(1)
		go s.refresh(s.o.MemberTTL / 3)
	}
	return nil
}

// Close ends the notice subscription and the members' refresher, and waits
// until they have stopped; then it withdraws this replica's fleet members
// (one call, bounded by Timeout; should it fail, they expire after
// MemberTTL). It does not close the client, which the caller owns. Calls
// after Close still reach the server, but Member does nothing. Close is
// idempotent and returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	ps := s.ps
	s.mu.Unlock()
	s.cancel()
	if ps != nil {
		_ = ps.Close() // ends a read in progress at once
	}
	s.wg.Wait()
	if first {
		s.withdraw()
	}
	return nil
}

// Lookup returns key as it stands: its version (that of its last park,
// resume, forget or write-back; 0 for none) and its park, if it is parked.
func (s *Store) Lookup(ctx context.Context, key string) (share.Change, error) {
	if s.err != nil {
		return share.Change{}, s.err
	}
	res, err := s.run(ctx, "lookup", []string{s.keys.record(key)})
	if err != nil {
		return share.Change{}, err
	}
	ch, _, err := readStands(res, key, "")
	if err != nil {
		return share.Change{}, badReply("lookup", err)
	}
	s.saw(ch.Version)
	if ch.Park != nil {
		s.believe(key, true)
	}
	return ch, nil
}

// Judge decides j and commits the decision in one step, as the library's
// rules do in memory, a park judging the failing fraction over the keys
// of the deployment (see Member); at the server's time unless ClientTime.
// It first writes this replica's changes of members not yet written, if
// any (a round trip more). A park is announced to the other replicas. It
// needs Open. A Judgment whose Ending is none of the library's is an error.
func (s *Store) Judge(ctx context.Context, j share.Judgment) (share.Verdict, error) {
	p := s.plan.Load()
	if s.err != nil || p == nil {
		return share.Verdict{}, firstErr(s.err, errNotOpen)
	}
	if j.Ending < share.EndingClean || j.Ending > share.EndingPlanned {
		return share.Verdict{}, fmt.Errorf("redisstore: judge: Judgment.Ending %v: not an ending of the library", j.Ending)
	}
	at, err := timeArg(j.Now, !s.o.ClientTime)
	if err != nil {
		return share.Verdict{}, fmt.Errorf("redisstore: judge: %w", err)
	}
	if err := s.membersFirst(ctx); err != nil {
		return share.Verdict{}, err
	}
	res, err := s.run(ctx, "judge", []string{s.keys.record(j.Key), s.keys.fleet(), s.keys.parked(), s.keys.held(),
		s.keys.causes(), p.key}, at, j.Ending.String(), boolArg(j.Healthy), j.Incarnation, encodeCause(j.Cause, j.Cause != ""),
		j.Shared, s.origin)
	if err != nil {
		return share.Verdict{}, err
	}
	v, err := readVerdict(res, j.Key, s.callTime(j.Now))
	if err != nil {
		return share.Verdict{}, badReply("judge", err)
	}
	if v.Park != nil {
		s.saw(v.Park.Version)
		s.believe(j.Key, true)
	}
	return v, nil
}

// Proceed asks at now whether the held restart of key may go. It needs
// Open.
func (s *Store) Proceed(ctx context.Context, key string, now time.Time) (share.Verdict, error) {
	p := s.plan.Load()
	if s.err != nil || p == nil {
		return share.Verdict{}, firstErr(s.err, errNotOpen)
	}
	at, err := timeArg(now, !s.o.ClientTime)
	if err != nil {
		return share.Verdict{}, fmt.Errorf("redisstore: proceed: %w", err)
	}
	res, err := s.run(ctx, "proceed", []string{s.keys.record(key), s.keys.fleet(), s.keys.held(), s.keys.causes(), p.key}, at)
	if err != nil {
		return share.Verdict{}, err
	}
	v, err := readVerdict(res, key, s.callTime(now))
	if err != nil {
		return share.Verdict{}, badReply("proceed", err)
	}
	if v.Park != nil {
		s.saw(v.Park.Version)
	}
	s.believe(key, v.Park != nil)
	return v, nil
}

// Resume clears the park of key whose version is version (the park's
// Version, as Lookup, Parked or a verdict gave it) and everything its
// guards counted, for every replica, and returns the park it cleared and
// the resume's own version. The other replicas are told at once. A key
// parked with another version, or not parked, stays as it is: Resume then
// returns a *share.ChangedError with the key as it stands (matching
// crashloop.ErrNotParked when it is not parked), so a resume delivered
// late never clears a newer park. now is not used: a resume reads no time.
func (s *Store) Resume(ctx context.Context, key string, version int64, now time.Time) (*crashloop.ParkedError, int64, error) {
	_ = now
	ch, pe, err := s.clear(ctx, "resume", key, version)
	if err != nil {
		return nil, 0, err
	}
	if pe == nil {
		return nil, 0, badReply("resume", errors.New("applied without the park it cleared"))
	}
	return pe, ch.Version, nil
}

// Forget drops every trace of key if its version is version (0 for a key
// with none), and returns the forget's own version; the other replicas are
// told when it was parked. Else it changes nothing and returns a
// *share.ChangedError with the key as it stands.
func (s *Store) Forget(ctx context.Context, key string, version int64) (int64, error) {
	ch, _, err := s.clear(ctx, "forget", key, version)
	return ch.Version, err
}

// clear runs resume or forget (op) of key naming version, and returns the
// key after it and the park it cleared.
func (s *Store) clear(ctx context.Context, op, key string, version int64) (share.Change, *crashloop.ParkedError, error) {
	if s.err != nil {
		return share.Change{}, nil, s.err
	}
	if version < 0 {
		return share.Change{}, nil, fmt.Errorf("redisstore: %s: version %d", op, version)
	}
	res, err := s.run(ctx, op, []string{s.keys.record(key), s.keys.parked(), s.keys.held()}, s.origin, version)
	if err != nil {
		return share.Change{}, nil, err
	}
	ch, applied, err := readStands(res, key, "applied")
	if err != nil {
		return share.Change{}, nil, badReply(op, err)
	}
	s.saw(ch.Version)
	if !applied {
		s.believe(key, ch.Park != nil)
		return share.Change{}, nil, &share.ChangedError{Key: key, Version: ch.Version, Park: ch.Park}
	}
	s.believe(key, false)
	pe := ch.Park
	ch.Park = nil
	return ch, pe, nil
}

// Restore writes back parks decided alone while Redis could not be reached,
// in one step. Each park's Version names the version of its key that its
// replica knew when it parked the key: a park is written (with the next
// version) only if its key is still at that version and not parked, so a
// key resumed or parked since keeps its state. Each park written is
// announced to the other replicas. Only the text of a park's LastError is
// kept. It returns, for each park, whether it was written and its key as it
// stands; with no parks it still reaches the server (to learn whether it
// answers again).
func (s *Store) Restore(ctx context.Context, parks []*crashloop.ParkedError) ([]share.Restored, error) {
	if s.err != nil {
		return nil, s.err
	}
	keys := make([]string, 0, 1+len(parks))
	keys = append(keys, s.keys.parked())
	args := make([]any, 0, 2+len(parks))
	args = append(args, s.origin, s.claimant())
	for _, pe := range parks {
		keys = append(keys, s.keys.record(pe.Key))
		args = append(args, encodePark(pe))
	}
	res, err := s.run(ctx, "restore", keys, args...)
	if err != nil {
		return nil, err
	}
	out, err := readRestored(res, parks)
	if err != nil {
		return nil, badReply("restore", err)
	}
	for _, r := range out {
		s.saw(r.Version)
		s.believe(r.Key, r.Park != nil)
	}
	return out, nil
}

// Claim reports whether this replica is the first to claim the transition
// of the given version, to announce it: of every replica, exactly one wins
// each version (a park Restore wrote is claimed by it). A claim is kept a
// day.
func (s *Store) Claim(ctx context.Context, version int64) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	return s.claim(ctx, s.keys.claim(version), version)
}

// claim sets the claim key of version (0 for the claim of a loss) to this
// Store if no Store has, and reports whether it holds it. The claim names
// the Store, not only its replica: a replica that restarts under the same
// Replica name is another Store, and must not win again what its former
// self won (and announced).
func (s *Store) claim(ctx context.Context, key string, version int64) (bool, error) {
	res, err := s.run(ctx, "claim", []string{key}, version, s.claimant())
	if err != nil {
		return false, err
	}
	o, err := readObject(res, "won")
	if err != nil {
		return false, badReply("claim", err)
	}
	f := fields{o: o}
	won := f.flag("won")
	if f.err != nil {
		return false, badReply("claim", f.err)
	}
	return won, nil
}

// claimant is what this Store's claims hold: its replica's name and its own
// random id.
func (s *Store) claimant() string { return s.o.Replica + "/" + s.origin }

// Parked returns the parks of every key of the deployment, sorted by key.
func (s *Store) Parked(ctx context.Context) ([]*crashloop.ParkedError, error) {
	if s.err != nil {
		return nil, s.err
	}
	res, err := s.run(ctx, "parked", []string{s.keys.parked()})
	if err != nil {
		return nil, err
	}
	out, err := readParked(res)
	if err != nil {
		return nil, badReply("parked", err)
	}
	for _, pe := range out {
		s.saw(pe.Version)
	}
	slices.SortFunc(out, func(a, b *crashloop.ParkedError) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Fleet returns the status of the fleet breaker at now (the server's time
// unless ClientTime), with the failing and live keys of the deployment
// (see Member; it first writes this replica's changes of members not yet
// written). It changes nothing else but the latest time (a breaker due to
// re-arm reads as re-armed, and re-arms, with its event, at the next Judge
// or Proceed); without Open it changes nothing at all, and reports the
// limit and cooldown the replicas last wrote.
func (s *Store) Fleet(ctx context.Context, now time.Time) (crashloop.FleetStatus, error) {
	if s.err != nil {
		return crashloop.FleetStatus{}, s.err
	}
	at, err := timeArg(now, !s.o.ClientTime)
	if err != nil {
		return crashloop.FleetStatus{}, fmt.Errorf("redisstore: fleet: %w", err)
	}
	if err := s.membersFirst(ctx); err != nil {
		return crashloop.FleetStatus{}, err
	}
	p := s.plan.Load()
	op, keys := "fleet_read", []string{s.keys.fleet(), s.keys.causes()}
	if p != nil {
		op, keys = "fleet", append(keys, p.key)
	}
	res, err := s.run(ctx, op, keys, at)
	if err != nil {
		return crashloop.FleetStatus{}, err
	}
	r, err := readFleet(res)
	if err != nil {
		return crashloop.FleetStatus{}, badReply(op, err)
	}
	rph, cooldown := r.perHour, r.cooldown
	if p != nil {
		if p.cfg.Fleet == nil {
			return crashloop.FleetStatus{}, nil
		}
		rph, cooldown = p.cfg.Fleet.RestartsPerHour, p.cfg.Fleet.Cooldown
	}
	if rph == 0 {
		return crashloop.FleetStatus{}, nil
	}
	st := crashloop.FleetStatus{BreakerTripped: r.tripped, FleetRestartsPerHour: rph,
		FailingKeys: r.failing, Keys: r.total, RestartsInHour: r.hour, HeldCauses: r.heldCauses}
	if st.BreakerTripped {
		at := r.since.Add(cooldown)
		st.RearmAt = &at
	}
	return st, nil
}

// callTime is the time a verdict carries for a call at now: now itself in
// client-time mode, else the zero time (the server's, from the reply).
func (s *Store) callTime(now time.Time) time.Time {
	if s.o.ClientTime {
		return now
	}
	return time.Time{}
}

// believe records whether this Store's Supervisor now holds key as parked,
// as it was told by a verdict, a lookup or a notice (see reconcile), and
// reports whether that changed.
func (s *Store) believe(key string, parked bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, had := s.known[key]
	if parked {
		s.known[key] = struct{}{}
	} else {
		delete(s.known, key)
	}
	return had != parked
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

var _ share.Ledger = (*Store)(nil)
