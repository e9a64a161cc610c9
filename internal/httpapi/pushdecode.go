package httpapi

import (
	"encoding/json"
	"unicode/utf8"
)

// decodePush reads a push body ({"items": [...]}) without reflection when
// it has the plain shape clients send: exactly the keys "items" and, per
// item, "queue", "partition", "payload", "transactionId", each at most
// once, strings without escapes, a payload that is not null. Anything else
// (other or repeated keys, escapes, nulls, bad JSON) is left to
// encoding/json (ok false), so the result and every error are the ones
// encoding/json gives. The payload is the value's bytes as sent, as a
// json.RawMessage holds them.
func decodePush(body []byte) (req pushRequest, ok bool) {
	l := jsonLexer{b: body}
	if !l.next('{') {
		return req, false
	}
	if k, ok := l.key(); !ok || k != "items" {
		return req, false
	}
	if !l.next('[') {
		return req, false
	}
	items := []pushItem{}
	if !l.next(']') {
		for {
			it, ok := l.pushItem()
			if !ok {
				return req, false
			}
			items = append(items, it)
			if l.next(']') {
				break
			}
			if !l.next(',') {
				return req, false
			}
		}
	}
	if !l.next('}') {
		return req, false
	}
	l.ws()
	if l.i != len(l.b) {
		return req, false
	}
	req.Items = &items
	return req, true
}

// jsonLexer reads the plain JSON decodePush accepts.
type jsonLexer struct {
	b []byte
	i int
}

func (l *jsonLexer) ws() {
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\t', '\n', '\r':
			l.i++
		default:
			return
		}
	}
}

// next consumes c (after white space) when it comes next.
func (l *jsonLexer) next(c byte) bool {
	l.ws()
	if l.i < len(l.b) && l.b[l.i] == c {
		l.i++
		return true
	}
	return false
}

// str reads a string without escapes or control characters, valid UTF-8.
func (l *jsonLexer) str() (string, bool) {
	if !l.next('"') {
		return "", false
	}
	for j := l.i; j < len(l.b); j++ {
		switch c := l.b[j]; {
		case c == '"':
			s := l.b[l.i:j]
			if !utf8.Valid(s) {
				return "", false
			}
			l.i = j + 1
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

// key reads an object key and its colon.
func (l *jsonLexer) key() (string, bool) {
	k, ok := l.str()
	if !ok || !l.next(':') {
		return "", false
	}
	return k, true
}

// raw reads one JSON value (not null) and returns its bytes.
func (l *jsonLexer) raw() ([]byte, bool) {
	l.ws()
	start, depth, inStr := l.i, 0, false
scan:
	for ; l.i < len(l.b); l.i++ {
		c := l.b[l.i]
		if inStr {
			switch c {
			case '\\':
				l.i++
			case '"':
				inStr = false
				if depth == 0 {
					l.i++
					break scan
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				break scan
			}
			if depth--; depth == 0 {
				l.i++
				break scan
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				break scan
			}
		}
	}
	if l.i > len(l.b) {
		return nil, false
	}
	v := l.b[start:l.i]
	if len(v) == 0 || v[0] == 'n' || !json.Valid(v) {
		return nil, false
	}
	return v, true
}

// pushItem reads one item object.
func (l *jsonLexer) pushItem() (it pushItem, ok bool) {
	if !l.next('{') {
		return it, false
	}
	if l.next('}') {
		return it, true
	}
	for {
		k, ok := l.key()
		if !ok {
			return it, false
		}
		switch k {
		case "payload":
			if it.Payload != nil {
				return it, false
			}
			v, ok := l.raw()
			if !ok {
				return it, false
			}
			it.Payload = append(json.RawMessage(nil), v...)
		case "queue", "partition", "transactionId":
			s, ok := l.str()
			if !ok {
				return it, false
			}
			p := &it.Queue
			if k == "partition" {
				p = &it.Partition
			} else if k == "transactionId" {
				p = &it.TransactionID
			}
			if *p != nil {
				return it, false
			}
			*p = &s
		default:
			return it, false
		}
		if l.next('}') {
			return it, true
		}
		if !l.next(',') {
			return it, false
		}
	}
}
