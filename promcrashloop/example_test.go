package promcrashloop_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/promcrashloop"
	"github.com/prometheus/client_golang/prometheus"
)

// A Supervisor whose events are counted and whose state is read at each
// scrape, served on /metrics, /status and /healthz. A program serves the
// Handler with http.ListenAndServe("127.0.0.1:9464", h); the example uses
// a test server.
func Example() {
	var events promcrashloop.Events
	sup, err := crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig(),
		crashloop.WithEventHandler(&events)) // or crashloop.MultiHandler(&events, crashloop.LogEvents(logger))
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(promcrashloop.NewCollector(sup), &events)
	srv := httptest.NewServer(&promcrashloop.Handler{Supervisor: sup, Gatherer: reg})
	defer srv.Close()

	err = sup.Run(context.Background(), "importer", func(context.Context) error {
		return crashloop.Permanent(errors.New("bad credentials")) // parks at once
	})
	fmt.Println(err != nil)

	printSeries(srv.URL+"/metrics", `{key="importer",`, `restarts_total{key="importer"}`, "startup_exhausted")
	// Output:
	// true
	// crashloop_events_total{kind="agent.startup_exhausted"} 1
	// crashloop_key_state{key="importer",state="parked"} 1
	// crashloop_parked{key="importer",reason="permanent_error"} 1
	// crashloop_restarts_total{key="importer"} 0
}

// With WithMaxKeys(0), no series has a key label: the number of series
// stays the same however many keys come and go, and crashloop_keys still
// counts them by state.
func ExampleWithMaxKeys() {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil
	sup, err := crashloop.NewSupervisor(cfg)
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"job-1", "job-2", "job-3"} {
		sup.Run(context.Background(), key, func(context.Context) error { return crashloop.Permanent(errors.New("bad input")) })
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(promcrashloop.NewCollector(sup, promcrashloop.WithMaxKeys(0)))
	srv := httptest.NewServer(&promcrashloop.Handler{Gatherer: reg})
	defer srv.Close()

	printSeries(srv.URL+"/metrics", "crashloop_")
	// Output:
	// crashloop_keys{state="backoff"} 0
	// crashloop_keys{state="exited"} 0
	// crashloop_keys{state="held"} 0
	// crashloop_keys{state="needs_human"} 0
	// crashloop_keys{state="parked"} 3
	// crashloop_keys{state="running"} 0
}

// The Info hook adds what the program knows beside the Supervisor to
// /status, here the last sd_notify STATUS= text of a child process.
func ExampleHandler_info() {
	cfg := crashloop.DefaultSupervisorConfig()
	cfg.Fleet = nil
	sup, err := crashloop.NewSupervisor(cfg)
	if err != nil {
		log.Fatal(err)
	}
	sup.Run(context.Background(), "web", func(context.Context) error { return crashloop.Permanent(errors.New("port in use")) })
	srv := httptest.NewServer(&promcrashloop.Handler{
		Supervisor: sup,
		Info:       func() any { return map[string]string{"status_text": "Binding :8080"} },
	})
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/status")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Keys map[string]crashloop.KeyStatus `json:"keys"`
		Info map[string]string              `json:"info"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		log.Fatal(err)
	}
	web := doc.Keys["web"]
	fmt.Println(web.State, web.Reason)
	fmt.Println(doc.Info["status_text"])
	// Output:
	// parked permanent_error
	// Binding :8080
}

// printSeries prints the series lines of the scrape at url that contain
// any of subs.
func printSeries(url string, subs ...string) {
	resp, err := http.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, s := range subs {
			if !strings.HasPrefix(line, "#") && strings.Contains(line, s) {
				fmt.Println(line)
				break
			}
		}
	}
}
