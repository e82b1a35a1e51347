package stream

import (
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a strict, allocation-light reader of the small JSON subset the
// input events use: one object whose values are strings, numbers or arrays
// of numbers. Its grammar is RFC 8259's; anything it does not need to read
// (objects, literals, nested arrays as values) is reported by kind rather
// than parsed, since decoding stops at the first error anyway. It replaces
// a json.Decoder token pass, which cost ~400 allocations per 1 KiB event.
// The fuzz tests check it against encoding/json on every accepted input.
type scanner struct {
	b []byte
	i int
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// ws skips whitespace and returns the next byte, or 0 at the end.
func (s *scanner) ws() byte {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
	if s.i == len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// kind names the JSON value starting at the current byte, for messages.
func (s *scanner) kind() string {
	switch s.ws() {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "a number"
	case 0:
		return "end of input"
	}
	return "an invalid character"
}

// valueStart reports whether c can begin a JSON value: a wrong-type value
// is bad_type, but a byte that starts no value at all is bad_json.
func valueStart(c byte) bool {
	switch c {
	case '{', '[', '"', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// str reads a JSON string at the current position (after whitespace) and
// returns its value; ok is false on a syntax error, with msg saying why.
// Like encoding/json, an escaped lone surrogate decodes to U+FFFD; raw
// bytes are valid UTF-8 because decodeObject checked the whole input.
func (s *scanner) str() (v string, msg string) {
	if s.ws() != '"' {
		return "", "want a string"
	}
	s.i++
	start := s.i
	// Fast path: no escapes.
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			v = string(s.b[start:s.i])
			s.i++
			return v, ""
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", "control character in string"
		}
		s.i++
	}
	buf := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), ""
		case c < 0x20:
			return "", "control character in string"
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return "", "unterminated escape"
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", `bad \u escape`
			}
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					lo, ok := s.hex4()
					if !ok {
						return "", `bad \u escape`
					}
					if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
						r2 = d
					} else {
						s.i = save // not a pair: the second escape stands alone
					}
				}
				r = r2
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", "bad escape character"
		}
	}
	return "", "unterminated string"
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

// num reads a JSON number (RFC 8259 section 6 grammar) and returns its
// text; ok is false if the bytes are not a number.
func (s *scanner) num() (text []byte, ok bool) {
	s.ws()
	start := s.i
	b := s.b
	i := s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false
		}
	}
	s.i = i
	return b[start:i], true
}
