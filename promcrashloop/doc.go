// Package promcrashloop exports a crashloop.Supervisor to Prometheus, with
// github.com/prometheus/client_golang.
//
// It has three parts, each usable alone:
//
//   - Collector reads Supervisor.Status at each scrape and exports, per
//     key, crashloop_restarts_total, crashloop_key_state and, while the key
//     is parked, crashloop_parked and
//     crashloop_parked_since_timestamp_seconds; unkeyed, crashloop_keys by
//     state and the fleet breaker's crashloop_fleet_breaker_tripped,
//     crashloop_fleet_restarts_in_hour, crashloop_fleet_failing_keys and
//     crashloop_fleet_keys.
//   - Events is an EventHandler that counts events into
//     crashloop_events_total{kind}.
//   - Handler serves /metrics, /status (the live JSON Status) and /healthz,
//     read-only.
//
// Keys are the Supervisor's, so the number of keyed series grows with them
// (two a key, four while it is parked); WithMaxKeys caps it, or drops the
// key label. The repository's docs/monitoring.md describes every series,
// how to aggregate them across the replicas of a shared ledger, the alert
// rules under deploy/prometheus and the dashboard under deploy/grafana.
package promcrashloop
