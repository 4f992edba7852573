package redisstore

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the outage tests fail thousands on
	// purpose, and assert what matters.
	redis.SetLogger(&logging.VoidLogger{})
	os.Exit(m.Run())
}
