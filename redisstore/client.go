package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
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
//     on the server already: sending it again would count a failure twice.
//     A cluster client sends commands again in a loop of its own, which
//     MaxRetries does not bound: build one with BoundedClusterOptions;
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

// BoundedClusterOptions returns a copy of o (nil for the zero
// ClusterOptions) for a cluster client bounded as BoundedOptions bounds a
// client (timeout <= 0: DefaultTimeout), and that never sends a command
// again once it may have run. It sets
//
//   - the timeouts, DialerRetries, MaxRetries and ContextTimeoutEnabled as
//     BoundedOptions does: every node client takes them;
//   - NewClient (default redis.NewClient) wrapped to add a hook to every
//     node client. A cluster client sends a command again, up to
//     MaxRedirects times (default 3), after a MOVED or ASK redirection,
//     but also after a lost reply (io.EOF, a reset, a read timeout), when
//     the command may have run already: a judge step would count a failure
//     twice. The hook returns such an error as a *LostReplyError, which the
//     cluster client does not send again.
//
// The cluster client still follows MOVED and ASK, and still tries again
// after an error the server answered with (READONLY, LOADING, CLUSTERDOWN,
// TRYAGAIN: the command did not run) and after a dial that failed (nothing
// was sent): that is how it reaches the master that took over a slot. Build
// a redis.ClusterClient of your own from it: the Store counts on no step
// being sent twice. Connect does, and also sets ClusterStateReloadInterval
// to 1s (go-redis's default is 60s) so that a failover is seen sooner.
// Everything else of o is kept. BoundedClusterOptions is a pure function,
// safe for concurrent use.
func BoundedClusterOptions(o *redis.ClusterOptions, timeout time.Duration) *redis.ClusterOptions {
	var c redis.ClusterOptions
	if o != nil {
		c = *o
	}
	b := BoundedOptions(nil, timeout)
	c.DialTimeout, c.ReadTimeout, c.WriteTimeout, c.PoolTimeout = b.DialTimeout, b.ReadTimeout, b.WriteTimeout, b.PoolTimeout
	c.DialerRetries, c.DialerRetryBackoff, c.MaxRetries, c.ContextTimeoutEnabled = b.DialerRetries, b.DialerRetryBackoff, b.MaxRetries, b.ContextTimeoutEnabled
	newClient := c.NewClient
	if newClient == nil {
		newClient = redis.NewClient
	}
	c.NewClient = func(opt *redis.Options) *redis.Client {
		nc := newClient(opt)
		nc.AddHook(sendOnce{addr: opt.Addr})
		return nc
	}
	return &c
}

// NewClient returns a client of the Redis server at rawURL, as
// redis.ParseURL reads it: redis://[user:password@]host:port/db,
// rediss://... (TLS) or unix://[user:password@]/path/redis.sock?db=N. When
// the URL holds no password, password is used (the command passes
// $REDIS_PASSWORD; "" for none). BoundedOptions(timeout) bounds every wait
// (timeout <= 0: DefaultTimeout). It does no I/O. Its errors never hold the
// password (user:password@ or ?password=), nor a URL that could not be
// parsed (it may hold one). It is safe for concurrent use. For Sentinel,
// Cluster, and TLS with a CA file or a client certificate, use Connect.
func NewClient(rawURL, password string, timeout time.Duration) (*redis.Client, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		u, perr := url.Parse(rawURL)
		if perr != nil {
			return nil, errUnparsable
		}
		return nil, errors.New(scrubAll(fmt.Sprintf("redisstore: Redis URL %s: %v", redactURL(u), err), u, password))
	}
	if o.Password == "" {
		o.Password = password
	}
	return redis.NewClient(BoundedOptions(o, timeout)), nil
}

// ClientOptions configures Connect. The zero value is no password, a
// DefaultTimeout bound, and TLS as the URL says (rediss://) with the
// system's certificate authorities and no client certificate. It is a plain
// value.
type ClientOptions struct {
	// Password is used when the URL holds none (the command passes
	// $REDIS_PASSWORD). Default "": none.
	Password string
	// Timeout bounds every wait, as BoundedOptions does. Default (<= 0)
	// DefaultTimeout.
	Timeout time.Duration
	// CAFile is a PEM file of the certificate authorities that sign the
	// server's certificate, in place of the system's. It needs a rediss://
	// URL. Default "": the system's.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that ask for one (tls-auth-clients). Both or neither; they
	// need a rediss:// URL. Default "": none.
	CertFile, KeyFile string
}

// clusterReload is how stale a cluster client's map of slots may grow
// before it asks the cluster again: a failover or a slot migration is seen
// within this long (go-redis's default is 60s, during which a client dials
// a dead master).
const clusterReload = time.Second

// Connect returns a client of the Redis deployment at rawURL, whatever its
// shape, bounded as BoundedOptions bounds a client (timeouts, one dial
// attempt, no command sent twice):
//
//   - Sentinel: a URL with master_name, as redis.ParseFailoverURL reads it:
//     redis://[user:password@]sentinel1:26379/db?master_name=NAME&addr=sentinel2:26379.
//     The user and password of the URL are the sentinels'; the master's
//     come from ?username= and ?password=, else from o.Password.
//   - Cluster: any other URL of a node whose INFO says cluster_enabled:1
//     (Connect asks the server, within the timeout): a cluster client
//     seeded with that node, of BoundedClusterOptions, whose map of slots
//     is at most a second old.
//   - Otherwise a plain client, as NewClient makes it. A server that cannot
//     be reached (or that refuses INFO) is taken for a plain one; if it is a
//     cluster node after all, the Store's steps fail with a
//     *MisconfiguredError (CauseMoved) when it does not own the slot.
//
// o adds TLS files to a rediss:// URL. Its errors never hold a password, in
// whatever place the URL holds one (user:password@, ?password=,
// ?sentinel_password=). Connect is safe for concurrent use; ctx bounds the
// cluster detection together with o.Timeout.
func Connect(ctx context.Context, rawURL string, o ClientOptions) (redis.UniversalClient, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	u, perr := url.Parse(rawURL)
	if perr != nil {
		return nil, errUnparsable
	}
	fail := func(err error) error {
		msg := fmt.Sprintf("redisstore: Redis URL %s: %v", redactURL(u), err)
		return errors.New(scrubAll(msg, u, o.Password))
	}
	if u.Query().Has("master_name") {
		fo, err := redis.ParseFailoverURL(rawURL)
		if err != nil {
			return nil, fail(err)
		}
		if fo.Password == "" {
			fo.Password = o.Password
		}
		if fo.TLSConfig, err = withFiles(fo.TLSConfig, o); err != nil {
			return nil, fail(err)
		}
		b := BoundedOptions(nil, timeout)
		fo.DialTimeout, fo.ReadTimeout, fo.WriteTimeout, fo.PoolTimeout = b.DialTimeout, b.ReadTimeout, b.WriteTimeout, b.PoolTimeout
		fo.DialerRetries, fo.DialerRetryBackoff, fo.MaxRetries, fo.ContextTimeoutEnabled = b.DialerRetries, b.DialerRetryBackoff, b.MaxRetries, b.ContextTimeoutEnabled
		return redis.NewFailoverClient(fo), nil
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fail(err)
	}
	if opt.Password == "" {
		opt.Password = o.Password
	}
	if opt.TLSConfig, err = withFiles(opt.TLSConfig, o); err != nil {
		return nil, fail(err)
	}
	b := BoundedOptions(opt, timeout)
	plain := redis.NewClient(b)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := plain.Info(ctx, "cluster").Result()
	if err != nil || !strings.Contains(info, "cluster_enabled:1") {
		return plain, nil
	}
	_ = plain.Close()
	co := BoundedClusterOptions(&redis.ClusterOptions{
		Addrs: []string{b.Addr}, Dialer: b.Dialer, Username: b.Username, Password: b.Password, TLSConfig: b.TLSConfig,
	}, timeout)
	co.ClusterStateReloadInterval = clusterReload
	return redis.NewClusterClient(co), nil
}

// errUnparsable is the error of a URL that url.Parse refuses: url.Parse
// quotes the whole URL, and a malformed one may split its password
// anywhere, so nothing of it is shown.
var errUnparsable = errors.New("redisstore: the Redis URL cannot be parsed (not shown: it may hold a password); use redis://host:port/db, rediss://host:port/db or unix:///path/redis.sock")

// withFiles adds o's CA and client certificate to c, the TLS of a
// rediss:// URL (nil for another scheme).
func withFiles(c *tls.Config, o ClientOptions) (*tls.Config, error) {
	if o.CAFile == "" && o.CertFile == "" && o.KeyFile == "" {
		return c, nil
	}
	if c == nil {
		return nil, errors.New("a CA file or client certificate needs a rediss:// URL")
	}
	c = c.Clone()
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", o.CAFile)
		}
		c.RootCAs = pool
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate file and its key file")
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// redactURL returns u without its passwords: the user's and those of the
// query (password, sentinel_password), each as xxxxx.
func redactURL(u *url.URL) string {
	c := *u
	q := c.Query()
	for _, k := range []string{"password", "sentinel_password"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
		}
	}
	c.RawQuery = q.Encode()
	return c.Redacted()
}

// scrubAll replaces in msg every password of u and password itself.
func scrubAll(msg string, u *url.URL, password string) string {
	pws := []string{password}
	if p, ok := u.User.Password(); ok {
		pws = append(pws, p)
	}
	for _, k := range []string{"password", "sentinel_password"} {
		pws = append(pws, u.Query()[k]...)
	}
	for _, p := range pws {
		if p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}
