// Package redisstore keeps the state of crashloop's guards on Redis, so that
// the replicas of a service, on one host or many, share one budget, one
// chain and one fleet breaker per key: a share.Ledger, given to a
// Supervisor with crashloop.WithSharing(share.New(store)).
//
//	client, err := redisstore.NewClient(os.Getenv("REDIS_URL"), os.Getenv("REDIS_PASSWORD"), redisstore.DefaultTimeout)
//	store := redisstore.New(client, redisstore.Options{Prefix: "gateway"}) // defer store.Close()
//	sup, err := crashloop.NewSupervisor(cfg, crashloop.WithSharing(share.New(store)))
//
// Each decision is one atomic step on the server (one Lua function), with the
// library's own rules: the library's conformance suite holds a Store to
// share.MemoryLedger against a real redis-server. Every key of a
// deployment shares one hash tag ({Prefix}), so the scripts run on Redis
// Cluster; the time is the server's unless Options.ClientTime; a park or
// resume reaches the other replicas through sharded pub/sub; no call waits
// longer than Options.Timeout, and a Supervisor whose store fails decides
// alone and writes its parks back later.
//
// Connect reaches every shape of deployment with the same bounds: a single
// server, a Redis Cluster (found from the server), Sentinel (a URL with
// master_name) and TLS with a CA file and a client certificate. A server
// that cannot keep the state safely (an evicting maxmemory-policy, a
// missing ACL permission, a refused password, a full server) fails with a
// *MisconfiguredError, which matches share.ErrMisconfigured: a
// Supervisor announces store.misconfigured, not store.unavailable.
//
// Every call also returns as soon as its context ends (cancelled, or past
// its deadline), with the context's error, even while a stalled server
// holds its command: the command runs on a goroutine bounded by
// Options.Timeout, which the caller does not wait for. A cancelled call may
// still be applied by the server later: a command sent before the cancel
// cannot be taken back, so a cancelled Judge may still count its failure
// and a cancelled Resume may still resume the key, though the caller got
// the context's error: treat the outcome of a cancelled call as unknown.
// Every transition of a key takes a version, and a resume, forget or
// write-back names the version its caller saw: one applied late never
// clears a park made since, and every replica learns the outcome from its
// notice.
//
// docs/redis.md in the repository covers the key layout, time, outages and
// cancellation, the persistence the guarantees need and what failover can
// lose, and the benchmarks.
package redisstore
