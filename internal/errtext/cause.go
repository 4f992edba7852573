package errtext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxCause is the most bytes a cause has: Cause cuts a longer one, on a
// character's boundary.
const MaxCause = 200

// Cause returns the cause of a failure whose text is text: the text with
// what differs between keys, hosts and runs normalized, so that one
// failure on many keys has one cause and different failures keep
// different ones. A run of decimal digits becomes "N" (so IPv4 addresses,
// ports, pids and counts do); a hexadecimal id or address becomes "X": one
// with a 0x prefix, a word of 8 or more hex digits with both a decimal
// digit and a letter in it, a UUID, an IPv6 address. Runs of spaces and
// control characters become one space, with none at either end; an
// invalid UTF-8 byte becomes U+FFFD. The result is at most MaxCause bytes
// of valid UTF-8 with no ASCII digit, and the cause of a cause is itself.
//
// A text that Text wrote for an error that tells how a program ended (an
// Exiter with an exit status or a signal) has the cause "exit status N" or
// "signal NAME" ("signal KILL (oom killed)" for an OOM kill), followed by
// ": " and the last line of its stderr tail that is not blank, if any. The
// error's own message, which may name the program, is left out. So the
// cause of a failure err is Cause(Text(err)), or CauseOf(err), not
// Cause(err.Error()).
//
// Cause takes time linear in len(text) and allocates the result alone
// (and, for a text that keeps an Exit, what decoding its JSON takes). It
// is safe for concurrent use.
func Cause(text string) string {
	var c causeWriter
	if msg, x := splitExit(text); x == nil || !c.exit(*x) {
		c.text(msg)
	}
	return string(c.buf[:c.n])
}

// CauseOf returns Cause(Text(err)) without encoding err's Exit: the cause
// of the failure err tells of, "" for a nil err.
func CauseOf(err error) string {
	if err == nil {
		return ""
	}
	var c causeWriter
	if x, ok := ExitOf(err); !ok || !c.exit(x) {
		c.text(err.Error())
	}
	return string(c.buf[:c.n])
}

// causeWriter builds a cause in a buffer of its own: the text's pieces go
// in one after the other, normalized, until the buffer is full.
type causeWriter struct {
	buf   [MaxCause]byte
	n     int
	space bool // a space is due before what comes next (none at the start)
	full  bool // the bound cut the cause: nothing more goes in
}

// exit writes the cause of how a program ended, if x tells its exit
// status or signal; it reports whether it did.
func (c *causeWriter) exit(x Exit) bool {
	switch {
	case x.ExitCode != nil:
		c.text("exit status N")
	case x.Signal != "":
		c.text("signal ")
		c.text(x.Signal)
		if x.OOMKilled {
			c.text(" (oom killed)")
		}
	default:
		return false
	}
	if line := lastLine(x.StderrTail); line != "" {
		c.text(": ")
		c.text(line)
	}
	return true
}

// lastLine returns the last line of text that is not blank (spaces and
// control characters only).
func lastLine(text string) string {
	for text != "" {
		i := strings.LastIndexByte(text, '\n')
		if line := text[i+1:]; strings.TrimFunc(line, isSpace) != "" {
			return line
		}
		if i < 0 {
			break
		}
		text = text[:i]
	}
	return ""
}

// text writes s normalized. s starts at a word's boundary.
func (c *causeWriter) text(s string) {
	for i := 0; i < len(s) && !c.full; {
		b := s[i]
		switch {
		case isAlnum(b) || (b == ':' && i+1 < len(s) && s[i+1] == ':'):
			if isAlnum(b) && isUUID(s, i) {
				c.put("X")
				i += 36
				continue
			}
			// An IPv6 address starts a run of hex digits and colons: each
			// run is read once.
			if i == 0 || !isHexColon(s[i-1]) {
				if end, ok := ipv6(s, i); ok {
					c.put("X")
					i = end
					continue
				}
			}
			if b == ':' {
				c.put(":")
				i++
				continue
			}
			j := i
			for j < len(s) && isAlnum(s[j]) {
				j++
			}
			c.word(s[i:j])
			i = j
		case b < utf8.RuneSelf:
			if isSpace(rune(b)) {
				c.space = c.n > 0
			} else {
				c.put(s[i : i+1])
			}
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				c.put("\uFFFD")
			case isSpace(r):
				c.space = c.n > 0
			default:
				c.put(s[i : i+size])
			}
			i += size
		}
	}
}

// isSpace reports whether r is one that a cause writes as a space: a
// control character or a Unicode space.
func isSpace(r rune) bool { return r <= ' ' || r == 0x7f || unicode.IsSpace(r) }

// word writes w, a maximal run of ASCII letters and digits: "X" for a hex
// id or address, else w with each run of decimal digits as "N".
func (c *causeWriter) word(w string) {
	if isHexID(w) {
		c.put("X")
		return
	}
	for i := 0; i < len(w) && !c.full; {
		j := i
		if isDigit(w[i]) {
			for j < len(w) && isDigit(w[j]) {
				j++
			}
			c.put("N")
		} else {
			for j < len(w) && !isDigit(w[j]) {
				j++
			}
			c.put(w[i:j])
		}
		i = j
	}
}

// put writes p, after the space that is due; if they do not fit, it
// writes what does up to a character's boundary, no space last, and
// nothing more goes in.
func (c *causeWriter) put(p string) {
	if c.full {
		return
	}
	if c.space {
		if c.n+1+len(p) > len(c.buf) {
			c.full = true
			return
		}
		c.buf[c.n] = ' '
		c.n++
		c.space = false
	}
	if k := copy(c.buf[c.n:], p); k < len(p) {
		for k > 0 && !utf8.RuneStart(p[k]) {
			k--
		}
		c.n += k
		c.full = true
		return
	}
	c.n += len(p)
}

// isHexID reports whether w, a maximal run of ASCII letters and digits, is
// a hex id or address: 0x and at least one hex digit, or 8 or more hex
// digits with both a decimal digit and a letter among them (decimal
// digits alone are a number).
func isHexID(w string) bool {
	if len(w) > 2 && w[0] == '0' && (w[1] == 'x' || w[1] == 'X') {
		return allHex(w[2:])
	}
	return len(w) >= 8 && allHex(w) && strings.ContainsAny(w, "0123456789") && strings.ContainsAny(w, "abcdefABCDEF")
}

// isUUID reports whether s[i:] starts with a UUID (8-4-4-4-12 hex digits)
// with a decimal digit in it, which no letter or digit follows.
func isUUID(s string, i int) bool {
	if len(s)-i < 36 || (len(s)-i > 36 && isAlnum(s[i+36])) {
		return false
	}
	digit := false
	for k := range 36 {
		b := s[i+k]
		switch k {
		case 8, 13, 18, 23:
			if b != '-' {
				return false
			}
		default:
			if !isHex(b) {
				return false
			}
			digit = digit || isDigit(b)
		}
	}
	return digit
}

// ipv6 reads the run of hex digits and colons at s[i:] and reports
// whether it is an IPv6 address (less a last lone colon): no letter or
// digit follows it, it has a decimal digit, groups of at most 4 hex
// digits, and "::" or at least 5 colons. It returns where the address
// ends, or else where the run does.
func ipv6(s string, i int) (int, bool) {
	end := i
	for end < len(s) && isHexColon(s[end]) {
		end++
	}
	if end < len(s) && isAlnum(s[end]) {
		return end, false
	}
	addr := s[i:end]
	if strings.HasSuffix(addr, ":") && !strings.HasSuffix(addr, "::") {
		addr = addr[:len(addr)-1]
	}
	colons, group, digit := 0, 0, false
	for k := 0; k < len(addr); k++ {
		if addr[k] == ':' {
			colons, group = colons+1, 0
			continue
		}
		if group++; group > 4 {
			return end, false
		}
		digit = digit || isDigit(addr[k])
	}
	if !digit || (colons < 5 && !strings.Contains(addr, "::")) {
		return end, false
	}
	return i + len(addr), true
}

func isDigit(b byte) bool    { return '0' <= b && b <= '9' }
func isHex(b byte) bool      { return isDigit(b) || ('a' <= b && b <= 'f') || ('A' <= b && b <= 'F') }
func isHexColon(b byte) bool { return isHex(b) || b == ':' }
func isAlnum(b byte) bool    { return isDigit(b) || ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z') }

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}
