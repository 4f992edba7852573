package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// oomCounter reads the kernel's count of OOM kills (its oom_kill line) in
// the memory cgroup that crashloop, and so the program it starts, runs in:
// memory.events of its cgroup v2, which counts the kills of the cgroup and
// of those below it; or, on a host whose memory controller is on a cgroup
// v1 hierarchy, memory.oom_control of its v1 memory cgroup (Linux 4.13 and
// later), which counts that cgroup's own. A nil *oomCounter counts nothing.
// It keeps no state and is safe for concurrent use.
type oomCounter struct{ path string } // memory.events or memory.oom_control

// newOOMCounter finds the file that counts the OOM kills of crashloop's
// memory cgroup, v2 first, or says why there is none.
func newOOMCounter() (*oomCounter, error) {
	c, err := cgroupCounter("", "memory.events")
	if err == nil {
		return c, nil
	}
	c, err1 := cgroupCounter("memory", "memory.oom_control")
	if err1 == nil {
		return c, nil
	}
	return nil, fmt.Errorf("cgroup v2: %w; cgroup v1: %w", err, err1)
}

// cgroupCounter returns the counter of file in crashloop's cgroup of the
// v1 controller, or of cgroup v2 for "".
func cgroupCounter(controller, file string) (*oomCounter, error) {
	mount, err := cgroupMount("/proc/self/mountinfo", controller)
	if err != nil {
		return nil, err
	}
	rel, err := cgroupPath("/proc/self/cgroup", controller)
	if err != nil {
		return nil, err
	}
	c := &oomCounter{path: filepath.Join(mount, rel, file)}
	if _, err := c.count(); err != nil {
		return nil, err
	}
	return c, nil
}

// count returns the oom_kill count.
func (c *oomCounter) count() (uint64, error) {
	data, err := os.ReadFile(c.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("%s does not exist: the memory controller is not on that cgroup", c.path)
		}
		return 0, err
	}
	for line := range bytes.Lines(data) {
		if v, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("oom_kill ")); ok {
			return strconv.ParseUint(string(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no oom_kill line", c.path)
}

// cgroupMount returns where the cgroup v2 hierarchy ("" controller), or
// the v1 hierarchy of controller, is mounted, from a mountinfo file such
// as /proc/self/mountinfo.
func cgroupMount(mountinfo, controller string) (string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(fs) < 3 {
			continue
		}
		if controller == "" && fs[0] == "cgroup2" ||
			controller != "" && fs[0] == "cgroup" && slices.Contains(strings.Split(fs[2], ","), controller) {
			return fields[4], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if controller == "" {
		return "", errors.New("no cgroup v2 is mounted (" + mountinfo + " has no cgroup2 line)")
	}
	return "", fmt.Errorf("no cgroup v1 %s hierarchy is mounted (%s has no cgroup line with %s)", controller, mountinfo, controller)
}

// cgroupPath returns the path of the process's cgroup in the cgroup v2
// hierarchy ("" controller: the "0::" line), or in the v1 hierarchy of
// controller, from a file such as /proc/self/cgroup.
func cgroupPath(file, controller string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if controller == "" && parts[0] == "0" && parts[1] == "" ||
			controller != "" && slices.Contains(strings.Split(parts[1], ","), controller) {
			return parts[2], nil
		}
	}
	if controller == "" {
		return "", errors.New(file + " has no cgroup v2 line (0::)")
	}
	return "", fmt.Errorf("%s has no cgroup v1 %s line", file, controller)
}
