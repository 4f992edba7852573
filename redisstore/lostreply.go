package redisstore

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/redis/go-redis/v9"
)

// LostReplyError is the error of a command that a node client of a
// BoundedClusterOptions cluster client sent, but whose reply it lost: the
// connection broke after the request was written (io.EOF, a reset), or the
// reply came later than the read timeout. The server may have run the
// command, so the cluster client returns this error instead of sending the
// command again. To a Store it is an outage, as the error it holds is.
//
// It matches (errors.Is) what Err matches, except io.EOF and
// io.ErrUnexpectedEOF, and it is no net.Error (errors.As): go-redis's
// cluster client sends again a command whose error is one of those, so the
// error must not look like them. Read Err for them. It is a plain value,
// safe to share.
type LostReplyError struct {
	// Addr is the node's address, as the cluster client names it.
	Addr string
	// Err is go-redis's error.
	Err error
}

// Error says that the reply was lost, from where, and why.
func (e *LostReplyError) Error() string {
	return "redisstore: lost the reply of " + e.Addr + " (the command may have run; it was not sent again): " + e.Err.Error()
}

// Is reports whether Err matches target, io.EOF and io.ErrUnexpectedEOF
// excepted.
func (e *LostReplyError) Is(target error) bool {
	if target == io.EOF || target == io.ErrUnexpectedEOF {
		return false
	}
	return errors.Is(e.Err, target)
}

// sendOnce is the hook of every node client of a BoundedClusterOptions
// cluster client, at addr: it returns a *LostReplyError for an error after
// which the server may have run the command, so that the cluster client
// does not send it again (its shouldRetry refuses the error).
type sendOnce struct{ addr string }

func (sendOnce) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h sendOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.lost(next(ctx, cmd))
	}
}

// ProcessPipelineHook covers the pipeline of ASKING and a command that the
// cluster client sends after an ASK redirection. (A pipeline of the cluster
// client itself resends its commands inside the hook: this cannot stop it.
// The Store sends none.)
func (h sendOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.lost(next(ctx, cmds))
	}
}

// lost returns err as a *LostReplyError when the command may have reached
// the server, else err itself.
func (h sendOnce) lost(err error) error {
	if err == nil {
		return nil
	}
	var (
		reply redis.Error
		op    *net.OpError
		lost  *LostReplyError
	)
	switch {
	case errors.As(err, &reply):
		// The server answered: it ran the command and said so, or refused
		// it (MOVED, ASK, LOADING, CLUSTERDOWN, TRYAGAIN: the script did
		// not run; READONLY: it changed nothing, its first write refused),
		// and go-redis may send it again, to the node that owns the slot
		// or once the node takes it.
		return err
	case errors.As(err, &op) && op.Op == "dial",
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted), errors.Is(err, redis.ErrClosed):
		// Nothing was sent: trying again (another dial, another node) is
		// what reaches a promoted master.
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.As(err, &lost):
		return err // go-redis sends none of these again
	}
	return &LostReplyError{Addr: h.addr, Err: err}
}
