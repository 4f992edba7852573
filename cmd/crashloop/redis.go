//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
	"github.com/crashloopguard/crashloop/redisstore"
	"github.com/crashloopguard/crashloop/share"
	"github.com/redis/go-redis/v9"
)

// passwordEnv is the environment variable the Redis password comes from
// when the URL has none.
const passwordEnv = "REDIS_PASSWORD"

// flushFor is how long crashloop, about to exit on a park it decided while
// Redis was unreachable, keeps trying to write that park back, so that the
// other replicas refuse the key too.
const flushFor = 10 * time.Second

// redisConfig is how crashloop reaches the shared state: --redis,
// --redis-prefix and --redis-timeout.
type redisConfig struct {
	url     string
	prefix  string
	timeout time.Duration
	ca      string // --redis-ca
	cert    string // --redis-cert
	key     string // --redis-key
}

// tlsFlags registers --redis-ca, --redis-cert and --redis-key on fs.
func (c *redisConfig) tlsFlags(fs *flagSet) {
	fs.String(&c.ca, "redis-ca", "", "with a rediss:// --redis: trust the certificate authorities in PEM `FILE` instead of the system's")
	fs.String(&c.cert, "redis-cert", "", "with a rediss:// --redis: present the client certificate in PEM `FILE` (with --redis-key)")
	fs.String(&c.key, "redis-key", "", "the key of --redis-cert, a PEM `FILE`")
}

// open returns a Store on the deployment of c: a plain server, a Redis
// Cluster (found from the server) or Sentinel (a URL with master_name). The
// password comes from the URL or, when it has none, from $REDIS_PASSWORD;
// it never appears in an error.
func (c redisConfig) open() (*redisstore.Store, error) {
	redis.SetLogger(quiet{})
	switch {
	case (c.cert == "") != (c.key == ""):
		return nil, usagef("--redis-cert and --redis-key: give both or neither")
	case (c.ca != "" || c.cert != "") && !strings.HasPrefix(c.url, "rediss://"):
		return nil, usagef("--redis-ca, --redis-cert: need a rediss:// --redis URL")
	}
	client, err := redisstore.Connect(context.Background(), c.url, redisstore.ClientOptions{
		Password: os.Getenv(passwordEnv), Timeout: c.timeout, CAFile: c.ca, CertFile: c.cert, KeyFile: c.key})
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "redisstore: ") // it never holds the password
		switch {
		case strings.Contains(msg, "CA file"):
			return nil, usagef("--redis-ca: %s", msg)
		case strings.Contains(msg, "client certificate"):
			return nil, usagef("--redis-cert, --redis-key: %s", msg)
		}
		return nil, usagef("--redis: %s", msg)
	}
	return redisstore.New(client, redisstore.Options{Prefix: c.prefix, Timeout: c.timeout}), nil
}

// check logs, at start, what the server lacks for the shared state (an
// evicting maxmemory-policy, a missing ACL permission) or could not tell.
// A server that does not answer says nothing here: the store.unavailable
// event says it.
func (c redisConfig) check(store *redisstore.Store, out *output) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	warning, err := store.Check(ctx)
	switch {
	case errors.Is(err, share.ErrMisconfigured):
		out.print(slog.LevelError, scrub(err, c.url).Error())
	case warning != "":
		out.print(slog.LevelWarn, warning)
	}
}

// quiet silences go-redis's own log lines (a plain "redis: ... pool.go:770:
// ..." on stderr for every failed dial), which would break --log-format
// json: what they say reaches the log once, as the store.unavailable and
// store.recovered events.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// redact returns a Redis URL without its passwords (user:password@,
// ?password=, ?sentinel_password=), for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	q := u.Query()
	for _, k := range []string{"password", "sentinel_password"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}

// withoutPassword returns a Redis URL without its password (the user name
// stays), for a command line that the reader completes with
// $REDIS_PASSWORD.
func withoutPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	_, inUser := u.User.Password()
	if !inUser && !q.Has("password") && !q.Has("sentinel_password") {
		return raw
	}
	if inUser {
		if name := u.User.Username(); name != "" {
			u.User = url.User(name)
		} else {
			u.User = nil
		}
	}
	q.Del("password")
	q.Del("sentinel_password")
	u.RawQuery = q.Encode()
	return u.String()
}

// scrub removes the URL's password from an error's text, should a library
// quote it.
func scrub(err error, raw string) error {
	u, perr := url.Parse(raw)
	if perr != nil {
		return err
	}
	pws := append(u.Query()["password"], u.Query()["sentinel_password"]...)
	if pw, ok := u.User.Password(); ok {
		pws = append(pws, pw)
	}
	msg := err.Error()
	for _, pw := range pws {
		if pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// parkedInRedis returns the park of key in the shared state, nil if none
// (or if Redis cannot be reached: the Supervisor's own gate then decides).
func parkedInRedis(store *redisstore.Store, key string, timeout time.Duration) *crashloop.ParkedError {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ch, err := store.Lookup(ctx, key)
	if err != nil {
		return nil
	}
	return ch.Park
}

// flush writes back, within flushFor, the parks sup decided while Redis
// was unreachable, and says what became of them. It reports whether Redis
// holds them now.
func flush(layer *share.Layer, out *output, key string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), flushFor)
	defer cancel()
	for {
		err := layer.Flush(ctx)
		if err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			out.print(slog.LevelError, fmt.Sprintf("the park of %s could not be written to Redis within %v: the other replicas do not know of it (%v)", key, flushFor, err), "key", key)
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// statusRedis prints what is parked in the shared state, and the fleet
// breaker.
func statusRedis(c redisConfig, asJSON bool, stdout io.Writer) error {
	var parks []*crashloop.ParkedError
	var fleet crashloop.FleetStatus
	err := c.do(func(ctx context.Context, store *redisstore.Store) (err error) {
		if parks, err = store.Parked(ctx); err != nil {
			return err
		}
		fleet, err = store.Fleet(ctx, time.Now())
		return err
	})
	if err != nil {
		return err
	}
	doc := parkedDoc{Source: "redis", Where: redact(c.url), Prefix: c.prefix, Parks: []parkDoc{}, Fleet: fleetOf(fleet)}
	slices.SortFunc(parks, func(a, b *crashloop.ParkedError) int { return strings.Compare(a.Key, b.Key) })
	for _, pe := range parks {
		doc.Parks = append(doc.Parks, parkOf(pe))
	}
	if asJSON {
		return printJSON(stdout, doc)
	}
	if len(parks) == 0 {
		fmt.Fprintf(stdout, "nothing is parked in %s (prefix %s)", redact(c.url), c.prefix)
		if fleet.Keys == 0 && fleet.RestartsInHour == 0 {
			fmt.Fprintf(stdout, "; no crashloop has reported under the prefix %s in the last hour: is --redis-prefix right?", c.prefix)
		}
		fmt.Fprintln(stdout)
	} else if err := printParks(stdout, doc.Parks); err != nil {
		return err
	}
	state := "armed"
	if fleet.BreakerTripped {
		state = "tripped"
		if fleet.RearmAt != nil {
			state += ", re-arms at " + fleet.RearmAt.Format(time.RFC3339)
		}
	}
	keys := "no key has reported to it yet"
	if fleet.Keys > 0 {
		keys = fmt.Sprintf("%d of %d keys failing", fleet.FailingKeys, fleet.Keys)
	}
	fmt.Fprintf(stdout, "fleet breaker: %s; %s in the last hour; %s\n", state, errtext.Plural(fleet.RestartsInHour, "restart"), keys)
	for _, cause := range fleet.HeldCauses {
		fmt.Fprintf(stdout, "restarts held for a shared cause: %s\n", oneLine(cause))
	}
	return nil
}

// resumeRedis clears the park of key in the shared state, for every
// replica.
func resumeRedis(c redisConfig, key string, stdout io.Writer) error {
	var refusal error // the user's mistake, not Redis's
	err := c.do(func(ctx context.Context, store *redisstore.Store) error {
		if key == "" {
			parks, err := store.Parked(ctx)
			if err != nil {
				return err
			}
			keys := make([]string, len(parks))
			for i, pe := range parks {
				keys[i] = pe.Key
			}
			if key, refusal = resumeKey(keys, redact(c.url)); refusal != nil {
				return nil
			}
		}
		// a resume names the park it clears, the one read here: one that
		// arrives late never clears a park made since
		ch, err := store.Lookup(ctx, key)
		if err != nil {
			return err
		}
		if ch.Park == nil {
			refusal = fmt.Errorf("%s is not parked in %s", key, redact(c.url))
			return nil
		}
		_, _, err = store.Resume(ctx, key, ch.Park.Version, time.Now())
		switch {
		case errors.Is(err, crashloop.ErrNotParked):
			refusal = fmt.Errorf("%s is not parked in %s", key, redact(c.url))
			return nil
		case errors.Is(err, share.ErrChanged):
			refusal = fmt.Errorf("%s was parked again in %s while it was being resumed: nothing was resumed; look at it and resume it again", key, redact(c.url))
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		return err
	case refusal != nil:
		return refusal
	}
	fmt.Fprintf(stdout, "resumed %s for every replica: %s\n", key, resumedHow)
	return nil
}

// do calls f with a Store on the server of c and a deadline of two
// timeouts, for status and resume. An error of f is Redis's: it is
// returned naming the URL, without its password.
func (c redisConfig) do(f func(ctx context.Context, store *redisstore.Store) error) error {
	store, err := c.open()
	if err != nil {
		return err
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.timeout)
	defer cancel()
	if err := f(ctx, store); err != nil {
		return fmt.Errorf("--redis %s: %s", redact(c.url), c.explain(err))
	}
	return nil
}

// explain words an error of Redis for status and resume: what went wrong
// (no connection, no answer in time), not which of redisstore's calls it
// was in ("redisstore: parked: epoch: dial tcp ...").
func (c redisConfig) explain(err error) string {
	var op *net.OpError
	switch {
	case errors.As(err, &op):
		return "cannot reach it: " + scrub(op, c.url).Error()
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %v (twice --redis-timeout)", 2*c.timeout)
	}
	return strings.ReplaceAll(scrub(err, c.url).Error(), "redisstore: ", "")
}
