package redistest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// SentinelName is the name the sentinel of StartSentinel monitors its
// master by.
const SentinelName = "crashloop"

// Sentinel is a master, its replica and one sentinel that watches them
// (quorum 1), on 127.0.0.1, started by StartSentinel. The sentinel fails the
// master over within about a second of its death (down-after-milliseconds
// 500). The zero value is not usable; its methods are safe for concurrent
// use.
type Sentinel struct {
	Master, Replica, Sentinel *Server
}

// StartSentinel starts a master, a replica of it and a sentinel, on TCP,
// and waits until the replica is in sync and the sentinel knows it. They
// are stopped when t ends.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	m := Start(t, WithTCP())
	r := Start(t, WithTCP(), func(c *config) { c.replica = m.addr })
	s := Start(t, WithTCP(), func(c *config) { c.watch = m.addr })
	ctx := context.Background()
	waitFor(t, func() bool {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.addr})
		defer c.Close()
		rs, err := c.Replicas(ctx, SentinelName).Result()
		return err == nil && len(rs) == 1 && !strings.Contains(rs[0]["flags"], "down")
	}, "the sentinel knows the replica")
	waitFor(t, func() bool {
		c := redis.NewClient(m.Options(nil))
		defer c.Close()
		info, err := c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "state=online")
	}, "the replica in sync")
	return &Sentinel{Master: m, Replica: r, Sentinel: s}
}

// URL returns the URL of the deployment through its sentinel, as
// redis.ParseFailoverURL reads it.
func (s *Sentinel) URL() string {
	return "redis://" + s.Sentinel.addr + "/0?master_name=" + SentinelName
}

// sentinelArgs returns the command line of a sentinel: its configuration
// file (written now: a sentinel rewrites it) and its address.
func (s *Server) sentinelArgs() []string {
	host, port, _ := net.SplitHostPort(s.cfg.watch)
	conf := filepath.Join(s.dir, "sentinel.conf")
	if _, err := os.Stat(conf); err != nil {
		text := "sentinel monitor " + SentinelName + " " + host + " " + port + " 1\n" +
			"sentinel down-after-milliseconds " + SentinelName + " 500\n" +
			"sentinel failover-timeout " + SentinelName + " 2000\n"
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			s.t.Fatalf("redistest: write sentinel.conf: %v", err)
		}
	}
	shost, sport, _ := net.SplitHostPort(s.addr)
	return []string{conf, "--sentinel", "--daemonize", "no", "--logfile", filepath.Join(s.dir, "redis.log"),
		"--bind", shost, "--port", sport, "--protected-mode", "no", "--dir", s.dir}
}
