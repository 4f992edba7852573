// Package ctxdone tells whether a caller's context has ended, for the
// root package and redisstore alike: a call that fails while its caller's
// context has ended failed because of the caller, not because of the
// ledger or the server it waited on.
package ctxdone

import (
	"context"
	"time"
)

// Err returns ctx's error once ctx has ended, or
// context.DeadlineExceeded once its deadline has passed even if ctx does
// not report it yet: a read bounded by that deadline may time out a moment
// before ctx's own timer fires. It returns nil while ctx goes on.
func Err(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
