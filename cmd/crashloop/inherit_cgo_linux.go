//go:build cgo && linux

package main

/*
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct crashloop_sigs {
	uint64_t ignored, blocked; // bit N-1 for signal N
	int captured;              // the constructor ran
};

static struct crashloop_sigs crashloop_start;

// crashloop_ksigaction is the kernel's struct sigaction, with room to
// spare after the handler and the flags.
struct crashloop_ksigaction {
#if defined(__mips__)
	unsigned int flags;
	void *handler;
#else
	void *handler;
	unsigned long flags;
#endif
	unsigned long rest[16];
};

// crashloop_capture_sigs records the signal state the process was started
// with. It runs before main, so before the Go runtime, which a cgo binary
// starts from main, installs its handlers and unblocks the signals it
// needs, and before glibc's first pthread_create installs its handler for
// signal 33. It asks the kernel itself: libc's sigaction refuses libc's
// own signals (glibc's 32 and 33, musl's 32 to 34).
__attribute__((constructor(101))) static void crashloop_capture_sigs(void) {
	sigset_t set;
	unsigned long words[64 / (8 * sizeof(unsigned long))];
	const unsigned bits = 8 * sizeof(unsigned long);
	if (sigprocmask(SIG_BLOCK, NULL, &set) != 0) {
		return;
	}
	// Linux's sigset_t is the kernel's: bit N-1 of the words, in order,
	// for signal N.
	memcpy(words, &set, sizeof words);
	for (unsigned n = 0; n < 64; n++) {
		if ((words[n / bits] >> (n % bits)) & 1) {
			crashloop_start.blocked |= (uint64_t)1 << n;
		}
	}
	for (int sig = 1; sig <= 64; sig++) {
		struct crashloop_ksigaction act;
		memset(&act, 0, sizeof act);
		if (syscall(SYS_rt_sigaction, sig, NULL, &act, (_NSIG - 1) / 8) == 0 && act.handler == (void *)SIG_IGN) {
			crashloop_start.ignored |= (uint64_t)1 << (sig - 1);
		}
	}
	crashloop_start.captured = 1;
}

static struct crashloop_sigs crashloop_start_sigs(void) { return crashloop_start; }
*/
import "C"

// startSigState returns the signal state the process was started with,
// as a C constructor read it before the Go runtime changed it. ok is false
// when the constructor did not run: in a binary linked with
// -linkmode=internal, whose entry point is the Go runtime's, not libc's.
func startSigState() (st sigState, ok bool) {
	s := C.crashloop_start_sigs()
	if s.captured == 0 {
		return sigState{}, false
	}
	return sigState{ignored: uint64(s.ignored), blocked: uint64(s.blocked)}, true
}
