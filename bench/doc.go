// Package bench holds the benchmarks that compare crashloop with its peers
// (golang.org/x/time/rate) and the benchmark of a realistic workload that
// tells whether keyed state needs sharding. It is a module of its own so
// that the library's go.mod requires nothing for them. See
// docs/benchmarks.md for how to run them and one run's results.
package bench
