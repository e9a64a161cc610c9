package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"
)

// The answers of the hot routes - push, pop, ack - are encoded by hand:
// the same bytes encoding/json writes for their types (field order,
// escaping: HTML-safe, U+2028 / U+2029, invalid UTF-8 as U+FFFD; a pop's
// message data compacted), without reflection and into a pooled buffer.
// TestHandEncodingMatchesEncodingJSON holds them to encoding/json's
// output.

// encBufs are the answers' encoding buffers (one request at a time each).
var encBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledBuf: a buffer grown past it (a large pop) is not kept.
const maxPooledBuf = 64 << 10

// writeEncoded answers status with the JSON enc appends, as writeJSON
// does with encoding/json's; enc returns false when it cannot (then
// fallback, a value for encoding/json, is written instead).
func writeEncoded(w http.ResponseWriter, status int, enc func([]byte) ([]byte, bool), fallback func() any) {
	bp := encBufs.Get().(*[]byte)
	b, ok := enc((*bp)[:0])
	if !ok {
		encBufs.Put(bp)
		writeJSON(w, status, fallback())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	if cap(b) <= maxPooledBuf {
		*bp = b[:0]
		encBufs.Put(bp)
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json encodes a string (with
// HTML escaping, its default).
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendRawJSON appends a json.RawMessage value as encoding/json does:
// compacted, HTML-escaped. false when it is not valid JSON, or when it
// holds a character HTML escaping would change (then the caller falls
// back to encoding/json).
func appendRawJSON(dst []byte, raw []byte) ([]byte, bool) {
	if bytes.ContainsAny(raw, "<>&\u2028\u2029") {
		return dst, false
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return dst, false
	}
	return buf.Bytes(), true
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// appendPushResults encodes a push answer ([]pushResult).
func appendPushResults(dst []byte, rs []pushResult) []byte {
	dst = append(dst, '[')
	for i, r := range rs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"index":`...)
		dst = strconv.AppendInt(dst, int64(r.Index), 10)
		dst = append(dst, `,"message_id":`...)
		dst = appendJSONString(dst, r.MessageID)
		dst = append(dst, `,"transaction_id":`...)
		dst = appendJSONString(dst, r.TransactionID)
		dst = append(dst, `,"queueName":`...)
		dst = appendJSONString(dst, r.QueueName)
		dst = append(dst, `,"status":`...)
		dst = appendJSONString(dst, r.Status)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendAckResults encodes an ack answer ([]ackResult).
func appendAckResults(dst []byte, rs []ackResult) []byte {
	dst = append(dst, '[')
	for i, r := range rs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"index":`...)
		dst = strconv.AppendInt(dst, int64(r.Index), 10)
		dst = append(dst, `,"transactionId":`...)
		dst = appendJSONString(dst, r.TransactionID)
		dst = append(dst, `,"success":`...)
		dst = appendBool(dst, r.Success)
		dst = append(dst, `,"error":`...)
		if r.Error == nil {
			dst = append(dst, "null"...)
		} else {
			dst = appendJSONString(dst, *r.Error)
		}
		dst = append(dst, `,"leaseReleased":`...)
		dst = appendBool(dst, r.LeaseReleased)
		dst = append(dst, `,"dlq":`...)
		dst = appendBool(dst, r.DLQ)
		dst = append(dst, `,"noop":`...)
		dst = appendBool(dst, r.Noop)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendOptString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendJSONString(dst, *s)
}

// appendPopResponse encodes a pop answer; false when a message's data
// needs encoding/json (see appendRawJSON).
func appendPopResponse(dst []byte, p *popResponse) ([]byte, bool) {
	dst = append(dst, `{"success":`...)
	dst = appendBool(dst, p.Success)
	dst = append(dst, `,"queue":`...)
	dst = appendJSONString(dst, p.Queue)
	dst = append(dst, `,"partition":`...)
	dst = appendJSONString(dst, p.Partition)
	dst = append(dst, `,"partitionId":`...)
	dst = appendJSONString(dst, p.PartitionID)
	dst = append(dst, `,"leaseId":`...)
	dst = appendJSONString(dst, p.LeaseID)
	dst = append(dst, `,"consumerGroup":`...)
	dst = appendJSONString(dst, p.ConsumerGroup)
	dst = append(dst, `,"partitionsClaimed":`...)
	dst = strconv.AppendInt(dst, int64(p.PartitionsClaimed), 10)
	dst = append(dst, `,"messages":`...)
	if p.Messages == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range p.Messages {
			m := &p.Messages[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = appendJSONString(dst, m.ID)
			dst = append(dst, `,"transactionId":`...)
			dst = appendJSONString(dst, m.TransactionID)
			dst = append(dst, `,"traceId":`...)
			dst = appendOptString(dst, m.TraceID)
			dst = append(dst, `,"data":`...)
			if m.Data == nil {
				dst = append(dst, "null"...)
			} else {
				var ok bool
				if dst, ok = appendRawJSON(dst, m.Data); !ok {
					return dst, false
				}
			}
			dst = append(dst, `,"producerSub":`...)
			dst = appendOptString(dst, m.ProducerSub)
			dst = append(dst, `,"createdAt":`...)
			dst = appendJSONString(dst, m.CreatedAt)
			dst = append(dst, `,"queue":`...)
			dst = appendJSONString(dst, m.Queue)
			dst = append(dst, `,"partitionId":`...)
			dst = appendJSONString(dst, m.PartitionID)
			dst = append(dst, `,"partition":`...)
			dst = appendJSONString(dst, m.Partition)
			dst = append(dst, `,"leaseId":`...)
			dst = appendJSONString(dst, m.LeaseID)
			dst = append(dst, `,"consumerGroup":`...)
			dst = appendJSONString(dst, m.ConsumerGroup)
			dst = append(dst, `,"deliveryAttempt":`...)
			dst = strconv.AppendInt(dst, int64(m.DeliveryAttempt), 10)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}'), true
}
