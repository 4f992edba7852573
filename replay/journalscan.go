package replay

import "bytes"

// rawEntry is the part of a journal entry that replay reads, as slices of
// the line (or of the strings encoding/json decoded, for a line the scan
// leaves to it).
type rawEntry struct {
	MessageID, Unit, UserUnit, Realtime []byte
	ExitCode, ExitStatus, UnitResult    []byte
	CodeFunc, UID, Message              []byte
	Invocation, UserInvocation          []byte
	messageRaw                          bool // Message holds escapes or bytes beyond ASCII: only encoding/json reads it
}

// strSpecial marks the bytes a JSON string cannot hold as they are: the
// quote that ends it, the backslash of an escape, the control characters,
// and (2) the bytes beyond ASCII, which encoding/json checks as UTF-8.
var strSpecial = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = 1
	}
	t['"'], t['\\'] = 1, 1
	for c := 0x80; c < 0x100; c++ {
		t[c] = 2
	}
	return t
}()

// scanString scans the JSON string that starts after the quote at b[i-1]
// and returns its bytes (escapes left as they are), the index after its
// closing quote, whether it holds escapes or bytes beyond ASCII, and
// whether it is a valid JSON string.
func scanString(b []byte, i int) (s []byte, next int, raw, ok bool) {
	start := i
	for i < len(b) {
		c := b[i]
		switch strSpecial[c] {
		case 0:
			i++
			continue
		case 2:
			raw = true
			i++
			continue
		}
		switch {
		case c == '"':
			return b[start:i], i + 1, raw, true
		case c < 0x20:
			return nil, 0, false, false
		}
		// A backslash: one of JSON's escapes.
		raw = true
		if i+1 >= len(b) {
			return nil, 0, false, false
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(b) {
				return nil, 0, false, false
			}
			for _, h := range b[i+2 : i+6] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return nil, 0, false, false
				}
			}
			i += 6
		default:
			return nil, 0, false, false
		}
	}
	return nil, 0, false, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// entryFields are the keys scanEntry keeps: the fields encoding/json would
// decode into journalEntry (whose names it matches without regard to
// case) and USER_INVOCATION_ID.
var entryFields = [...]string{"MESSAGE_ID", "UNIT", "USER_UNIT", "__REALTIME_TIMESTAMP", "EXIT_CODE", "EXIT_STATUS",
	"UNIT_RESULT", "CODE_FUNC", "_UID", "MESSAGE", "INVOCATION_ID", "USER_INVOCATION_ID"}

// foldsToAField reports whether key, which is none of entryFields, may be
// taken for one by encoding/json, which matches names without regard to
// case: a key of capitals, digits and underscores only cannot be.
func foldsToAField(key []byte) bool {
	for _, c := range key {
		if !('A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			if c >= 0x80 {
				return true // Unicode's folds (the Kelvin sign is a K): leave it to encoding/json
			}
			for _, f := range entryFields {
				if bytes.EqualFold(key, []byte(f)) {
					return true
				}
			}
			return false
		}
	}
	return false
}

// scanEntry reads the fields of rawEntry from the JSON object b in one
// pass, without allocating, when b is what journalctl writes: a flat
// object whose every value is a string, the values of the fields kept
// plain (no escape, ASCII). It reports false for any other line, which
// encoding/json then reads (and tells apart a valid line from an
// invalid one): whatever it accepts is valid JSON, and reads as
// encoding/json reads it. b starts with '{' and ends with '}'.
func scanEntry(b []byte, e *rawEntry) bool {
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == '}' {
		return i == len(b)-1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		key, next, raw, ok := scanString(b, i+1)
		if !ok || raw {
			return false // a key with escapes may decode to a field's name
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) || b[i] != '"' {
			return false // a value that is no string: an array of bytes, several values, null
		}
		v, next, raw, ok := scanString(b, i+1)
		if !ok {
			return false
		}
		var dst *[]byte
		switch string(key) {
		case "MESSAGE_ID":
			dst = &e.MessageID
		case "UNIT":
			dst = &e.Unit
		case "USER_UNIT":
			dst = &e.UserUnit
		case "__REALTIME_TIMESTAMP":
			dst = &e.Realtime
		case "EXIT_CODE":
			dst = &e.ExitCode
		case "EXIT_STATUS":
			dst = &e.ExitStatus
		case "UNIT_RESULT":
			dst = &e.UnitResult
		case "CODE_FUNC":
			dst = &e.CodeFunc
		case "_UID":
			dst = &e.UID
		case "INVOCATION_ID":
			dst = &e.Invocation
		case "USER_INVOCATION_ID":
			dst = &e.UserInvocation
		case "MESSAGE":
			// Most messages are plain; one with escapes matters only
			// to an entry of systemd before 240, which is then left
			// to encoding/json.
			e.Message, e.messageRaw = v, raw
		default:
			if foldsToAField(key) {
				return false
			}
		}
		if dst != nil {
			if raw {
				return false
			}
			*dst = v
		}
		i = skipSpace(b, next)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '}':
			return i == len(b)-1
		case ',':
			i = skipSpace(b, i+1)
		default:
			return false
		}
	}
}
