package replay

import (
	"bufio"
	"errors"
	"io"
)

// errKlog is the error of a klog line in a stream of Kubernetes objects.
var errKlog = errors.New("a klog line of the program that wrote the stream (I0519 19:35:06.330217 ...), not a Kubernetes object")

// klogFilter passes a stream of Kubernetes objects on without the klog
// lines mixed into it: an event exporter's log (kubectl logs of its pod)
// carries its client's own lines ("Waited for ... due to client-side
// throttling") between the events it prints. Each line dropped is told to
// drop with its line number. Lines longer than the buffer pass whole.
type klogFilter struct {
	src  *bufio.Reader
	line int // the number of the next line
	drop func(line int)
	buf  []byte // what is left of the line passed on
	bol  bool   // the next byte read starts a line
}

func newKlogFilter(src io.Reader, first int, drop func(int)) *klogFilter {
	return &klogFilter{src: bufio.NewReaderSize(src, 64<<10), line: first, drop: drop, bol: true}
}

func (f *klogFilter) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		chunk, err := f.src.ReadSlice('\n')
		if len(chunk) == 0 && err != nil {
			if err == bufio.ErrBufferFull {
				continue
			}
			return 0, err
		}
		start := f.bol
		f.bol = len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		if start && isKlog(chunk) {
			f.drop(f.line)
			if f.bol {
				f.line++
			} else {
				f.skipRest()
			}
			continue
		}
		if f.bol {
			f.line++
		}
		f.buf = chunk
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

// skipRest drops the rest of a klog line longer than the buffer.
func (f *klogFilter) skipRest() {
	for {
		chunk, err := f.src.ReadSlice('\n')
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			f.line++
			f.bol = true
			return
		}
		if err != bufio.ErrBufferFull {
			return
		}
	}
}

// isKlog reports whether line starts as klog writes a line: a severity
// (I, W, E or F), the month and day, the time to the microsecond, then a
// space ("I0519 19:35:06.330217 ").
func isKlog(line []byte) bool {
	const form = "L0000 00:00:00.000000 "
	if len(line) < len(form) {
		return false
	}
	switch line[0] {
	case 'I', 'W', 'E', 'F':
	default:
		return false
	}
	for i := 1; i < len(form); i++ {
		switch c := line[i]; form[i] {
		case '0':
			if c < '0' || c > '9' {
				return false
			}
		default:
			if c != form[i] {
				return false
			}
		}
	}
	return true
}
