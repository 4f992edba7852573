package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// oomCounter reads the kernel's count of OOM kills (oom_kill in
// memory.events) of the cgroup v2 that crashloop, and so the program it
// starts, runs in. It needs cgroup v2 with the memory controller on that
// cgroup: a container, or a systemd unit with MemoryMax=, has it. The file
// counts the kills of the cgroup and of those below it. A nil *oomCounter
// counts nothing. It keeps no state and is safe for concurrent use.
type oomCounter struct{ path string } // memory.events

// newOOMCounter finds the memory.events file of crashloop's cgroup v2, or
// says why there is none.
func newOOMCounter() (*oomCounter, error) {
	mount, err := cgroup2Mount("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	rel, err := cgroup2Path("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	c := &oomCounter{path: filepath.Join(mount, rel, "memory.events")}
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
			return 0, fmt.Errorf("%s does not exist: the memory controller is not enabled on crashloop's cgroup v2", c.path)
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

// cgroup2Mount returns where the cgroup v2 hierarchy is mounted, from a
// mountinfo file such as /proc/self/mountinfo.
func cgroup2Mount(mountinfo string) (string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(fs) >= 1 && fs[0] == "cgroup2" {
			return fields[4], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no cgroup v2 is mounted (" + mountinfo + " has no cgroup2 line)")
}

// cgroup2Path returns the path of the process's cgroup v2 in its
// hierarchy, from a file such as /proc/self/cgroup (its "0::" line).
func cgroup2Path(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(data)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New(file + " has no cgroup v2 line (0::)")
}
