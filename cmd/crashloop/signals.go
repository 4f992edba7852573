//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// forwarded are the signals crashloop passes on to the program's process
// group and otherwise ignores, as tini and s6 do: HUP (a closed terminal, or
// "reload"), USR1 and USR2 (log rotation, reloads), WINCH (a resized
// terminal) and QUIT (which does not stop crashloop, nor make it dump its
// goroutines).
var forwarded = []os.Signal{syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGQUIT}

// handleSignals routes crashloop's signals to r until the returned function
// is called: INT and TERM stop supervision (runner.stop), the others are
// forwarded.
func handleSignals(r *runner) (stop func()) {
	c := make(chan os.Signal, 16)
	signal.Notify(c, append([]os.Signal{syscall.SIGINT, syscall.SIGTERM}, forwarded...)...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-c:
				sig := s.(syscall.Signal)
				if sig == syscall.SIGINT || sig == syscall.SIGTERM {
					r.stop(sig)
				} else {
					r.forward(sig)
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(c)
		close(done)
	}
}
