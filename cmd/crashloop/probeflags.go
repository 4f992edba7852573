//go:build unix

package main

// probeFlags registers --probe-after and --probe-max on the settings of a
// command that judges a policy (replay, simulate, tune, plan), unless s
// has them already, and returns their names. They set the probe after a
// park (SupervisorConfig.ProbeAfter and ProbeMax) over --config's
// probe_after and probe_max.
func probeFlags(s *settings) []string {
	names := []string{"probe-after", "probe-max"}
	if s.fs.Lookup(names[0]) == nil {
		s.fs.Duration(&s.probeAfter, names[0], 0, "after a park for any reason but a permanent one, one probe start this long after it, then twice that, and so on up to --probe-max; a probe whose run becomes healthy resumes the key; 0: off")
		s.fs.Duration(&s.probeMax, names[1], 0, "the longest interval between two probes; 0: 16 x --probe-after")
	}
	return names
}
