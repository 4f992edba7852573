package redistest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of several nodes on 127.0.0.1, started by
// StartCluster: masters that share the slots, each with its replicas. Its
// nodes fail over within about a second of a master's death
// (cluster-node-timeout 500ms). The zero value is not usable; its methods
// are safe for concurrent use.
type Cluster struct {
	Masters  []*Server   // Masters[i] owns the i-th of equal ranges of slots at start
	Replicas [][]*Server // Replicas[i] replicate Masters[i] at start
}

// StartCluster starts a cluster of masters masters with replicas replicas
// each, on TCP, and waits until every replica is in sync and every node says
// the cluster is ok and knows every replica. The nodes are stopped when t ends.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	member := func(c *config) { c.cluster, c.member, c.tcp = true, true, true }
	cl := &Cluster{}
	var all []*Server
	for range masters {
		m := Start(t, member)
		cl.Masters = append(cl.Masters, m)
		all = append(all, m)
	}
	for range masters {
		var rs []*Server
		for range replicas {
			r := Start(t, member)
			rs = append(rs, r)
			all = append(all, r)
		}
		cl.Replicas = append(cl.Replicas, rs)
	}
	ctx := context.Background()
	first := cl.Masters[0]
	host, port, _ := strings.Cut(first.addr, ":")
	for _, n := range all[1:] {
		do(t, n, "CLUSTER", "MEET", host, port, strconv.Itoa(first.bus))
	}
	per := 16384 / masters
	for i, m := range cl.Masters {
		hi := (i+1)*per - 1
		if i == masters-1 {
			hi = 16383
		}
		do(t, m, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(i*per), strconv.Itoa(hi))
	}
	for i, rs := range cl.Replicas {
		id := nodeID(t, cl.Masters[i])
		for _, r := range rs {
			waitFor(t, func() bool {
				c := redis.NewClient(r.Options(nil))
				defer c.Close()
				return c.Do(ctx, "CLUSTER", "REPLICATE", id).Err() == nil // once r has heard of the master
			}, "replica of "+cl.Masters[i].addr)
		}
	}
	for _, m := range cl.Masters {
		waitFor(t, func() bool {
			c := redis.NewClient(m.Options(nil))
			defer c.Close()
			info, err := c.Info(ctx, "replication").Result()
			return err == nil && strings.Count(info, "state=online") == replicas
		}, "the replicas of "+m.addr+" in sync")
	}
	for _, n := range all {
		waitFor(t, func() bool {
			c := redis.NewClient(n.Options(nil))
			defer c.Close()
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
			nodes, err := c.ClusterNodes(ctx).Result()
			return err == nil && strings.Count(nodes, "slave") == masters*replicas
		}, "cluster ok at "+n.addr)
	}
	return cl
}

// URL returns the URL of the cluster's first master: a plain URL of one
// node, as a client that discovers the cluster from it takes it.
func (c *Cluster) URL() string { return c.Masters[0].URL() }

// Owner returns the master that owns key's slot at start.
func (c *Cluster) Owner(t testing.TB, key string) *Server {
	t.Helper()
	cl := redis.NewClient(c.Masters[0].Options(nil))
	defer cl.Close()
	slot, err := cl.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("redistest: CLUSTER KEYSLOT: %v", err)
	}
	per := int64(16384 / len(c.Masters))
	return c.Masters[min(slot/per, int64(len(c.Masters)-1))]
}

// Index returns i such that Masters[i] is m, or -1.
func (c *Cluster) Index(m *Server) int {
	for i, s := range c.Masters {
		if s == m {
			return i
		}
	}
	return -1
}

// do runs a command on s, or fails t.
func do(t testing.TB, s *Server, args ...any) {
	t.Helper()
	c := redis.NewClient(s.Options(nil))
	defer c.Close()
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("redistest: %v on %s: %v", args, s.addr, err)
	}
}

// nodeID returns the cluster node id of s.
func nodeID(t testing.TB, s *Server) string {
	t.Helper()
	c := redis.NewClient(s.Options(nil))
	defer c.Close()
	id, err := c.Do(context.Background(), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.addr, err)
	}
	return id
}

// waitFor polls cond until it holds, or fails t after startTimeout.
func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: not within %v", what, startTimeout)
		}
		time.Sleep(10 * time.Millisecond) // polling for readiness, not timing anything
	}
}

// Announce makes the cluster node s give addr (host:port, as a TCP proxy's
// Addr) to clients as its address, in CLUSTER SLOTS and SHARDS and in
// redirections, and waits until its CLUSTER SHARDS does. Other nodes learn
// it by gossip, later: a test that needs every node to say it waits for
// that itself.
func (s *Server) Announce(addr string) {
	s.t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		s.t.Fatalf("redistest: Announce %q: %v", addr, err)
	}
	do(s.t, s, "CONFIG", "SET", "cluster-announce-ip", host, "cluster-announce-port", port)
	id := nodeID(s.t, s)
	c := redis.NewClient(s.Options(nil))
	defer c.Close()
	waitFor(s.t, func() bool {
		shards, err := c.ClusterShards(context.Background()).Result()
		if err != nil {
			return false
		}
		for _, sh := range shards {
			for _, n := range sh.Nodes {
				if n.ID == id {
					return net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10)) == addr
				}
			}
		}
		return false
	}, "CLUSTER SHARDS of "+s.addr+" naming "+addr)
}
