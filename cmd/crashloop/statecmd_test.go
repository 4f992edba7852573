//go:build unix

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResumeKey: resume without a KEY, on a state file or on Redis, clears
// the one parked key, and otherwise says that nothing, or which keys, are
// parked where.
func TestResumeKey(t *testing.T) {
	key, err := resumeKey([]string{"web"}, "state.json")
	require.NoError(t, err)
	assert.Equal(t, "web", key)

	key, err = resumeKey(nil, "redis://redis.internal:6379")
	assert.EqualError(t, err, "nothing is parked in redis://redis.internal:6379")
	assert.Empty(t, key)

	parked := []string{"worker", "api", "web"}
	key, err = resumeKey(parked, "state.json")
	assert.EqualError(t, err, "several keys are parked in state.json, name one: api, web, worker")
	assert.Empty(t, key)
	assert.Equal(t, []string{"worker", "api", "web"}, parked, "the caller's slice is left as it was")
}
