package pushenvelope

import (
	"encoding/base64"
	"unicode/utf8"
)

// scanWire reads a wrapped body written the way Pub/Sub writes it (known
// keys, each once, strings without escapes, a plain deliveryAttempt) in one
// pass without reflection, filling w exactly as encoding/json would
// (FuzzScanWire compares them). For any other body it returns false,
// whatever it has written. docs/design.md says why it exists.
func scanWire(b []byte, w *wirePush) bool {
	s := scanner{b: b}
	var seen keys
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "message":
			w.Message = new(wireMessage)
			return seen.once(1) && s.message(w.Message)
		case "subscription":
			return seen.once(2) && s.str(&w.Subscription)
		case "deliveryAttempt":
			return seen.once(4) && s.count(&w.DeliveryAttempt)
		case "delivery_attempt":
			return seen.once(8) && s.count(&w.DeliveryAttemptSnake)
		}
		return false
	})
	return ok && seen&1 != 0 && s.end()
}

// keys records which keys of an object have been read, a bit each.
type keys uint

// once reports whether bit's key is new.
func (k *keys) once(bit keys) bool {
	if *k&bit != 0 {
		return false
	}
	*k |= bit
	return true
}

// scanner reads JSON from b[i:].
type scanner struct {
	b []byte
	i int
}

// message reads the message object into m.
func (s *scanner) message(m *wireMessage) bool {
	var seen keys
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "data":
			return seen.once(1) && s.base64(&m.Data)
		case "attributes":
			return seen.once(2) && s.attributes(&m.Attributes)
		case "messageId":
			return seen.once(4) && s.str(&m.MessageID)
		case "message_id":
			return seen.once(8) && s.str(&m.MessageIDSnake)
		case "publishTime":
			return seen.once(16) && s.str(&m.PublishTime)
		case "publish_time":
			return seen.once(32) && s.str(&m.PublishTimeSnake)
		case "orderingKey":
			return seen.once(64) && s.str(&m.OrderingKey)
		case "ordering_key":
			return seen.once(128) && s.str(&m.OrderingKeySnake)
		}
		return false
	})
}

// attributes reads an object of strings into a new map.
func (s *scanner) attributes(out *map[string]string) bool {
	attrs := map[string]string{}
	ok := s.object(func(key []byte) bool {
		if _, dup := attrs[string(key)]; dup {
			return false
		}
		var v string
		if !s.str(&v) {
			return false
		}
		attrs[string(key)] = v
		return true
	})
	*out = attrs
	return ok
}

// object reads an object, calling field, which reads the value, with each
// key once the scanner is past its colon.
func (s *scanner) object(field func(key []byte) bool) bool {
	if !s.skip('{') {
		return false
	}
	if s.skip('}') {
		return true
	}
	for {
		key, ok := s.raw()
		if !ok || !s.skip(':') || !field(key) {
			return false
		}
		if s.skip('}') {
			return true
		}
		if !s.skip(',') {
			return false
		}
	}
}

// raw reads a string without escapes and returns its bytes.
func (s *scanner) raw() ([]byte, bool) {
	if !s.skip('"') {
		return nil, false
	}
	for j := s.i; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[s.i:j]
			s.i = j + 1
			return v, utf8.Valid(v) // encoding/json replaces invalid UTF-8
		case c == '\\' || c < 0x20: // an escape, or a byte JSON forbids
			return nil, false
		}
	}
	return nil, false
}

// str reads a string without escapes into out.
func (s *scanner) str(out *string) bool {
	v, ok := s.raw()
	*out = string(v)
	return ok
}

// base64 reads message.data as base64Data.UnmarshalJSON does, leaving a
// bad value to encoding/json, which names the error.
func (s *scanner) base64(out *base64Data) bool {
	v, ok := s.raw()
	if !ok {
		return false
	}
	d := make([]byte, base64.StdEncoding.DecodedLen(len(v)))
	n, err := base64.StdEncoding.Decode(d, v)
	*out = d[:n]
	return err == nil
}

// count reads a non-negative integer of at most nine digits.
func (s *scanner) count(out *int) bool {
	s.space()
	n, j := 0, s.i
	for ; j < len(s.b) && j-s.i < 10 && '0' <= s.b[j] && s.b[j] <= '9'; j++ {
		n = n*10 + int(s.b[j]-'0')
	}
	digits := j - s.i
	if digits == 0 || digits > 9 || digits > 1 && s.b[s.i] == '0' {
		return false
	}
	if j < len(s.b) { // 1.5, 1e3: a number that goes on
		if c := s.b[j]; c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	s.i, *out = j, n
	return true
}

// skip reads c after white space.
func (s *scanner) skip(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}
