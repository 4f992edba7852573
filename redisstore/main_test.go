package redisstore

import (
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the outage tests fail thousands on
	// purpose, and assert what matters.
	redis.SetLogger(&logging.VoidLogger{})
	// TestMutants runs this binary again with a mutant of store.lua.
	if err := applyMutant(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	go meter.run()
	os.Exit(m.Run())
}
