package ctxdone

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestErr(t *testing.T) {
	assert.NoError(t, Err(context.Background()))

	ctx, cancel := context.WithCancel(context.Background())
	assert.NoError(t, Err(ctx))
	cancel()
	assert.ErrorIs(t, Err(ctx), context.Canceled)

	// A deadline in the past is reported whether or not ctx's timer fired.
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	assert.ErrorIs(t, Err(past), context.DeadlineExceeded)

	future, cancelFuture := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancelFuture()
	assert.NoError(t, Err(future))
}
