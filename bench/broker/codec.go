package main

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Request bodies, encoded by hand into a reused buffer (encoding/json's
// reflection per push was a measurable part of the client's CPU), and the
// answers' decoding. The bodies are the JSON Queen's clients send.

// pushItem is one item of POST /api/v1/push: its payload is
// {"seq":Seq,"body":Body}; TxID, when set, is a transactionId the client
// chose ([16]byte{}: none, the broker uses the message id).
type pushItem struct {
	Queue     string
	Partition string
	Seq       int64
	Body      string
	TxID      [16]byte
}

// appendPushBody appends {"items":[{"queue":…,"partition":…,"payload":{"seq":…,"body":…}},…]}.
func appendPushBody(b []byte, items []pushItem) []byte {
	b = append(b, `{"items":[`...)
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"queue":`...)
		b = appendJSONString(b, it.Queue)
		b = append(b, `,"partition":`...)
		b = appendJSONString(b, it.Partition)
		b = append(b, `,"payload":{"seq":`...)
		b = strconv.AppendInt(b, it.Seq, 10)
		b = append(b, `,"body":`...)
		b = appendJSONString(b, it.Body)
		b = append(b, '}')
		if it.TxID != ([16]byte{}) {
			b = append(b, `,"transactionId":"`...)
			b = appendUUID(b, it.TxID)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// newUUID4 returns a random (version 4) UUID from two random words, as
// Queen's JS client generates a transactionId for every pushed item.
func newUUID4(hi, lo uint64) [16]byte {
	var u [16]byte
	binary.BigEndian.PutUint64(u[:8], hi)
	binary.BigEndian.PutUint64(u[8:], lo)
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u
}

// appendUUID appends u as 8-4-4-4-12 lower-case hex.
func appendUUID(b []byte, u [16]byte) []byte {
	const hex = "0123456789abcdef"
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return b
}

// appendAckBody appends the body of POST /api/v1/ack/batch acknowledging
// msgs as completed, as Queen's JS client writes it:
// {"acknowledgments":[{"transactionId","status","error":null,"partitionId","leaseId"},…],"consumerGroup":…}
// (null when the pop named no group).
func appendAckBody(b []byte, group string, msgs []message) []byte {
	b = append(b, `{"acknowledgments":[`...)
	for i := range msgs {
		m := &msgs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"transactionId":`...)
		b = appendJSONString(b, m.TransactionID)
		b = append(b, `,"status":"completed","error":null`...)
		if m.PartitionID != "" {
			b = append(b, `,"partitionId":`...)
			b = appendJSONString(b, m.PartitionID)
		}
		if m.LeaseID != "" {
			b = append(b, `,"leaseId":`...)
			b = appendJSONString(b, m.LeaseID)
		}
		b = append(b, '}')
	}
	b = append(b, `],"consumerGroup":`...)
	if group == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, group)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string (quotes, backslashes and
// control characters escaped; invalid UTF-8 as U+FFFD, as encoding/json).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// pushStatus is an item of the push answer.
type pushStatus struct {
	Status string `json:"status"`
}

// queuedCount decodes a push answer ([{"status":"queued",…},…]) into res
// (reused) and counts the items queued.
func queuedCount(raw []byte, res *[]pushStatus) (int, error) {
	*res = (*res)[:0]
	if err := json.Unmarshal(raw, res); err != nil {
		return 0, err
	}
	n := 0
	for _, r := range *res {
		if r.Status == "queued" {
			n++
		}
	}
	return n, nil
}

// message is one popped message (the fields the benchmark reads); the
// payload's seq is decoded with it.
type message struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
	Data          struct {
		Seq *int64 `json:"seq"`
	} `json:"data"`
}

type popResponse struct {
	Messages []message `json:"messages"`
}

// ackResult is an item of the ack answer.
type ackResult struct {
	Success bool `json:"success"`
}
