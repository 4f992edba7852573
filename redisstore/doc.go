// Package redisstore keeps the state of crashloop's guards on Redis, so that
// several replicas of a supervisor share one budget, one chain and one fleet
// breaker per key.
package redisstore
