// Command replica is one replica of the fault run (docs/faults.md): a
// Supervisor sharing its keys through a redisstore.Store, whose keys fail
// again and again, which resumes parked keys at random moments, and which
// logs every decision, event and ledger call as JSON lines (see
// faultrun.Record). Every random choice comes from -seed. SIGTERM stops it:
// it stops deciding and resuming, waits until the claims it may still
// make are made, logs "stop" and exits.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore"
	"github.com/crashloopguard/crashloop/redisstore/internal/faultrun"
	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
}

func run() error {
	url := flag.String("redis", "", "the server's URL")
	name := flag.String("replica", "", "this replica's name")
	seed := flag.Uint64("seed", 1, "the seed of every random choice")
	keys := flag.Int("keys", 4, "how many keys it runs")
	logPath := flag.String("log", "", "the file it appends its records to")
	timeout := flag.Duration("timeout", redisstore.DefaultTimeout, "the store's timeout")
	life := flag.Uint64("life", 0, "how many times this replica was started before (a restarted replica draws other numbers)")
	flag.Parse()
	if *url == "" || *name == "" || *logPath == "" {
		return errors.New("-redis, -replica and -log are required")
	}
	redis.SetLogger(&logging.VoidLogger{}) // a failed dial a decision during an outage
	lg, err := faultrun.OpenLog(*logPath)
	if err != nil {
		return err
	}
	defer lg.Close()
	pid := os.Getpid()
	logf := func(r faultrun.Record) {
		if r.T == 0 {
			r.T = time.Now().UnixNano()
		}
		r.R, r.Pid = *name, pid
		lg.Write(r)
	}
	logf(faultrun.Record{Op: faultrun.OpStart})

	client, err := redisstore.NewClient(*url, "", *timeout)
	if err != nil {
		return err
	}
	defer client.Close()
	store := redisstore.New(client, redisstore.Options{Prefix: "faultrun", Timeout: *timeout, Replica: *name})
	defer store.Close()
	claims := &claimsByGoroutine{won: map[uint64]int64{}}
	l := &ledger{Store: store, log: logf, claims: claims}
	handler := crashloop.EventHandlerFunc(func(ev crashloop.Event) {
		r := faultrun.Record{Op: faultrun.OpEvent, Key: ev.Key, Kind: ev.Kind.String(), Reason: ev.Reason}
		if ev.Kind.Stops() || ev.Kind == crashloop.EventResumed {
			r.Version = claims.get()
		}
		logf(r)
	})
	sup, err := crashloop.NewSupervisor(Config(), crashloop.WithSharing(share.New(l)), crashloop.WithEventHandler(handler))
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	// A stream of the seed for each loop and each life of the replica: a
	// replica restarted after a kill does not replay its first life.
	rng := func(i uint64) *rand.Rand { return rand.New(rand.NewPCG(*seed, i|*life<<32)) }
	var wg sync.WaitGroup
	for i := range *keys {
		wg.Go(func() { crash(ctx, sup, claims, logf, "k"+strconv.Itoa(i), rng(uint64(i)+1)) })
	}
	wg.Go(func() { resume(ctx, sup, claims, logf, *keys, rng(0)) })
	wg.Go(func() { meter(ctx, logf) })
	wg.Wait()
	// A transition this replica learnt late is claimed a second after it
	// learnt it, and a claim that could not be sent is tried again every
	// second: let the last of them go out before the process ends.
	time.Sleep(2500 * time.Millisecond)
	logf(faultrun.Record{Op: faultrun.OpStop})
	return nil
}

// Config is the Supervisor configuration of every replica: a budget of 3
// respawns in a window far longer than a run, short backoffs so that a key
// parks within a second, every failure a failed start (HealthyAfter of an
// hour), no chain and no fleet breaker.
func Config() crashloop.SupervisorConfig {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Budget = crashloop.BudgetConfig{MaxRespawns: 3, Window: time.Hour, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	cfg.HealthyAfter = time.Hour
	cfg.Chain, cfg.Fleet = nil, nil
	return cfg
}

var errCrash = errors.New("exit status 1")

// crash runs key in a loop whose every run fails after a few milliseconds,
// deciding each end through the Supervisor, until ctx ends.
func crash(ctx context.Context, sup *crashloop.Supervisor, claims *claimsByGoroutine, logf func(faultrun.Record), key string, rng *rand.Rand) {
	for ctx.Err() == nil {
		started := time.Now()
		pause(ctx, time.Duration(5+rng.IntN(35))*time.Millisecond) // the run, until it fails
		claims.clear()
		t0 := time.Now()
		d := sup.Decide(context.Background(), key, crashloop.RunResult{Err: errCrash, Started: started})
		r := faultrun.Record{T: t0.UnixNano(), Op: faultrun.OpDecide, Key: key, Took: int64(time.Since(t0)), Action: d.Action.String(), Wait: int64(d.Wait)}
		if d.Err != nil {
			r.Err = d.Err.Error()
		}
		if pe, ok := errors.AsType[*crashloop.ParkedError](d.Err); ok {
			r.Park = pe.Version
		}
		logf(r)
		switch d.Action {
		case crashloop.ActionRestart, crashloop.ActionHold:
			pause(ctx, d.Wait)
		default: // parked: ask again a little later
			pause(ctx, time.Duration(100+rng.IntN(300))*time.Millisecond)
		}
	}
}

// resume resumes a parked key (or, now and then, one that is not) at
// random moments until ctx ends.
func resume(ctx context.Context, sup *crashloop.Supervisor, claims *claimsByGoroutine, logf func(faultrun.Record), keys int, rng *rand.Rand) {
	for ctx.Err() == nil {
		pause(ctx, time.Duration(200+rng.IntN(1300))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		key := "k" + strconv.Itoa(rng.IntN(keys))
		if parked := sup.Parked(); len(parked) > 0 && rng.IntN(5) > 0 {
			key = parked[rng.IntN(len(parked))]
		}
		claims.clear()
		t0 := time.Now()
		err := sup.Resume(context.Background(), key)
		r := faultrun.Record{T: t0.UnixNano(), Op: faultrun.OpResume, Key: key, Took: int64(time.Since(t0))}
		if err != nil {
			r.Err = err.Error()
		}
		logf(r)
	}
}

// meter logs each time this process was not scheduled for a while (a
// wake-up of a 5ms sleep more than 20ms late): the checker tells a
// decision that waited on the store from one whose process stood still.
// Its sleep is the instrument, not a wait for a condition.
func meter(ctx context.Context, logf func(faultrun.Record)) {
	const tick, least = 5 * time.Millisecond, 20 * time.Millisecond
	last := time.Now()
	for ctx.Err() == nil {
		time.Sleep(tick)
		now := time.Now()
		if late := now.Sub(last) - tick; late > least {
			logf(faultrun.Record{T: last.Add(tick).UnixNano(), Op: faultrun.OpStall, Took: int64(late)})
		}
		last = now
	}
}

// pause waits d or until ctx ends: the run's own pace, not a wait for a
// condition.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// claimsByGoroutine remembers, for each goroutine, the version whose claim
// it won last: a Supervisor announces the events of a transition on the
// goroutine that claimed it, right after its claim is won, so the handler
// reads there which transition an event announces (crashloop.Event has no
// version). The loops of this program clear their goroutine's entry before
// each call of the Supervisor; the goroutines of delayed claims end after
// one claim.
type claimsByGoroutine struct {
	mu  sync.Mutex
	won map[uint64]int64
}

func (c *claimsByGoroutine) set(v int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v == 0 {
		delete(c.won, goid())
		return
	}
	c.won[goid()] = v
}

func (c *claimsByGoroutine) get() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.won[goid()]
}

func (c *claimsByGoroutine) clear() { c.set(0) }

// goid returns the id of the calling goroutine, from the first line of its
// stack ("goroutine 42 [running]:"). For this test program's bookkeeping
// only.
func goid() uint64 {
	var b [64]byte
	s := b[:runtime.Stack(b[:], false)]
	s = bytes.TrimPrefix(s, []byte("goroutine "))
	if i := bytes.IndexByte(s, ' '); i > 0 {
		s = s[:i]
	}
	id, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil {
		panic("replica: cannot read the goroutine's id: " + err.Error())
	}
	return id
}

// ledger is the replica's redisstore.Store, logging each call and what the
// server answered.
type ledger struct {
	*redisstore.Store
	log    func(faultrun.Record)
	claims *claimsByGoroutine
}

// inDoubt reports whether a failed call may have been applied all the
// same: every failure but a refused connection (nothing was sent) and a
// ChangedError (the server answered that it changed nothing).
func inDoubt(err error) bool {
	_, changed := errors.AsType[*share.ChangedError](err)
	return err != nil && !changed && !errors.Is(err, syscall.ECONNREFUSED) && !strings.Contains(err.Error(), "connection refused")
}

func record(op, key string, t0 time.Time, err error) faultrun.Record {
	r := faultrun.Record{T: t0.UnixNano(), Op: op, Key: key, Took: int64(time.Since(t0)), InDoubt: inDoubt(err)}
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

func parkVersion(pe *crashloop.ParkedError) int64 {
	if pe == nil {
		return 0
	}
	return pe.Version
}

func (l *ledger) Open(cfg crashloop.SupervisorConfig, notify func(share.Change)) error {
	return l.Store.Open(cfg, func(ch share.Change) {
		l.log(faultrun.Record{Op: faultrun.OpNotice, Key: ch.Key, Version: ch.Version, Park: parkVersion(ch.Park), Forgotten: ch.Forgotten})
		notify(ch)
	})
}

func (l *ledger) Lookup(ctx context.Context, key string) (share.Change, error) {
	t0 := time.Now()
	ch, err := l.Store.Lookup(ctx, key)
	r := record(faultrun.OpLookup, key, t0, err)
	if err == nil {
		r.Version, r.Park = ch.Version, parkVersion(ch.Park)
	}
	l.log(r)
	return ch, err
}

func (l *ledger) Judge(ctx context.Context, j share.Judgment) (share.Verdict, error) {
	t0 := time.Now()
	v, err := l.Store.Judge(ctx, j)
	r := record(faultrun.OpJudge, j.Key, t0, err)
	if err == nil {
		r.Park, r.NewPark, r.Held, r.Now = parkVersion(v.Park), v.NewPark, v.Held, v.Now.UnixNano()
		r.Version = r.Park
	}
	l.log(r)
	return v, err
}

func (l *ledger) Resume(ctx context.Context, key string, version int64, now time.Time) (*crashloop.ParkedError, int64, error) {
	t0 := time.Now()
	sent := record(faultrun.OpResumeSent, key, t0, nil)
	sent.Named, sent.Took = version, 0
	l.log(sent) // before the call: a kill in it leaves this alone
	pe, v, err := l.Store.Resume(ctx, key, version, now)
	r := record(faultrun.OpResumeCall, key, t0, err)
	r.Named = version
	if err == nil {
		r.Park, r.Version = parkVersion(pe), v
	}
	if ce, ok := errors.AsType[*share.ChangedError](err); ok {
		r.Changed, r.Version, r.Park = true, ce.Version, parkVersion(ce.Park)
	}
	l.log(r)
	return pe, v, err
}

func (l *ledger) Restore(ctx context.Context, parks []*crashloop.ParkedError) ([]share.Restored, error) {
	t0 := time.Now()
	stand, err := l.Store.Restore(ctx, parks)
	if len(parks) == 0 {
		l.log(record(faultrun.OpRestore, "", t0, err)) // asks whether the server answers again
	}
	for i, pe := range parks {
		r := record(faultrun.OpRestore, pe.Key, t0, err)
		r.Named = pe.Version
		if err == nil && i < len(stand) {
			r.Written, r.Version, r.Park = stand[i].Written, stand[i].Version, parkVersion(stand[i].Park)
		}
		l.log(r)
	}
	return stand, err
}

func (l *ledger) Claim(ctx context.Context, version int64) (bool, error) {
	t0 := time.Now()
	won, err := l.Store.Claim(ctx, version)
	r := record(faultrun.OpClaim, "", t0, err)
	r.Version, r.Won = version, won
	l.log(r)
	if won {
		l.claims.set(version)
	} else {
		l.claims.clear()
	}
	return won, err
}
