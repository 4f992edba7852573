package replay

import (
	"time"

	"github.com/crashloopguard/crashloop"
)

// The package's every call of a Supervisor method that judges or reads
// state at a time goes through these three functions, so that a change of
// those methods' signatures is one edit here.

// decideAt judges the end of a run of key at now.
func decideAt(s *crashloop.Supervisor, key string, r crashloop.RunResult, now time.Time) crashloop.Decision {
	return s.DecideAt(key, r, now)
}

// proceedAt asks whether the held restart of key may go at now.
func proceedAt(s *crashloop.Supervisor, key string, now time.Time) crashloop.Decision {
	return s.ProceedAt(key, now)
}

// resumeAt resumes key at now.
func resumeAt(s *crashloop.Supervisor, key string, now time.Time) error {
	return s.ResumeAt(key, now)
}
