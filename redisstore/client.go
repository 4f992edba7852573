package redisstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout is the longest one decision waits for Redis when no other
// timeout is set: 300ms. It is far above a healthy round trip (tens of
// microseconds on one host, a millisecond or two across a data centre) and
// short enough that a supervisor that falls back to its local guards does so
// before a restart is noticeably late.
const DefaultTimeout = 300 * time.Millisecond

// BoundedOptions returns a copy of o (nil for the zero Options) whose
// settings keep one command from waiting for Redis longer than timeout
// (DefaultTimeout when timeout <= 0), whatever the failure: a refused
// connection fails at once, and a black-holed server (packets vanish), a
// slow one, or one killed mid-command fail after at most timeout, without
// retries. It sets
//
//   - DialTimeout, ReadTimeout, WriteTimeout and PoolTimeout to timeout;
//   - DialerRetries to 1: one dial attempt. go-redis dials 5 times with
//     100ms pauses by default, and reads 0 or less as that default, so a
//     refused connection took 400ms and a black hole 5 dial timeouts;
//   - MaxRetries to -1: no command is sent twice. The default (3 retries,
//     each with its own dials) turns one refused decision into 20 dials,
//     and a decision whose reply was lost (a reset, a timeout) may have run
//     on the server already: sending it again would count a failure twice;
//   - ContextTimeoutEnabled: the deadline of the caller's context bounds the
//     socket reads and writes too, so a decision made under
//     context.WithTimeout(ctx, timeout) ends by its deadline even when the
//     pool has to dial and handshake first (each phase alone is bounded by
//     the settings above; together, only the context bounds them).
//
// Everything else (address, credentials, TLS, pool size) is kept. Apply it
// after redis.ParseURL: a URL cannot set DialerRetries. BoundedOptions is a
// pure function, safe for concurrent use.
func BoundedOptions(o *redis.Options, timeout time.Duration) *redis.Options {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var c redis.Options
	if o != nil {
		c = *o
	}
	c.DialTimeout = timeout
	c.DialerRetries = 1
	c.DialerRetryBackoff = nil
	c.ReadTimeout = timeout
	c.WriteTimeout = timeout
	c.PoolTimeout = timeout
	c.MaxRetries = -1
	c.ContextTimeoutEnabled = true
	return &c
}

// NewClient returns a client of the Redis server at rawURL, as
// redis.ParseURL reads it: redis://[user:password@]host:port/db,
// rediss://... (TLS) or unix://[user:password@]/path/redis.sock?db=N. When
// the URL holds no password, password is used (the command passes
// $REDIS_PASSWORD; "" for none). BoundedOptions(timeout) bounds every wait
// (timeout <= 0: DefaultTimeout). It does no I/O. Its errors never hold the
// password, nor a URL that could not be parsed (it may hold one). It is
// safe for concurrent use.
func NewClient(rawURL, password string, timeout time.Duration) (*redis.Client, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		u, perr := url.Parse(rawURL)
		if perr != nil {
			// url.Parse quotes the whole URL, and a malformed one may
			// split its password anywhere: say nothing of it.
			return nil, errors.New("redisstore: the Redis URL cannot be parsed (not shown: it may hold a password); use redis://host:port/db, rediss://host:port/db or unix:///path/redis.sock")
		}
		msg := err.Error()
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
		if password != "" {
			msg = strings.ReplaceAll(msg, password, "xxxxx")
		}
		return nil, fmt.Errorf("redisstore: Redis URL %s: %s", u.Redacted(), msg)
	}
	if o.Password == "" {
		o.Password = password
	}
	return redis.NewClient(BoundedOptions(o, timeout)), nil
}
