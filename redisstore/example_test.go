package redisstore_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/redisstore"
	"github.com/crashloopguard/crashloop/share"
)

// Every replica of a service runs this: they share each key's budget,
// chain and guards, and one fleet breaker.
func ExampleNew() {
	client, err := redisstore.NewClient("redis://redis.internal:6379/0", os.Getenv("REDIS_PASSWORD"), redisstore.DefaultTimeout)
	if err != nil {
		log.Fatal(err) // the URL cannot be read; the error never holds the password
	}
	store := redisstore.New(client, redisstore.Options{Prefix: "gateway"})
	defer store.Close()
	sup, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig(), crashloop.WithSharing(share.New(store)),
		crashloop.WithEventHandler(crashloop.LogEvents(nil)))
	if err != nil {
		log.Fatal(err)
	}
	err = sup.Run(context.Background(), "session-42", func(ctx context.Context) error {
		return errors.New("the upstream refused the session")
	})
	var pe *crashloop.ParkedError
	if errors.As(err, &pe) {
		// Parked for every replica; any of them (or "crashloop resume
		// --redis") resumes it.
		log.Print(pe)
	}
}
