package httpapi

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The hand encoders of the push, ack and pop answers write exactly what
// encoding/json writes for the same values: every string escape (HTML,
// control characters, U+2028 / U+2029, invalid UTF-8), nulls, empty lists,
// message data compacted (and, when it holds a character HTML escaping
// changes, encoded by encoding/json itself).
func TestHandEncodingMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	pieces := []string{"a", "Zz9", " ", `"`, `\`, "/", "<", ">", "&", "\x00", "\x01", "\x1f", "\x7f", "\b", "\f", "\n", "\r", "\t",
		"é", "日本", "\u2028", "\u2029", "\U0001F600", "\xff", "\xe2\x80", "\xc3", "\ufffd", "\u00a0", "'"}
	str := func() string {
		var b []byte
		for n := rng.Intn(6); n > 0; n-- {
			b = append(b, pieces[rng.Intn(len(pieces))]...)
		}
		return string(b)
	}
	datas := []string{`{"seq": 1, "body": "xxx"}`, ` [1, 2 ,{"a" : null}] `, `"s"`, `12.5e3`, `true`, `null`, `{}`,
		`{"html": "<b>&</b>"}`, "{\"sep\": \"\u2028\"}", `{"esc": "\u003c\n\"x\""}`, `{"bad": }`, ``}
	check := func(what string, want any, enc func([]byte) ([]byte, bool)) {
		t.Helper()
		a, b := httptest.NewRecorder(), httptest.NewRecorder()
		writeJSON(a, http.StatusOK, want)
		writeEncoded(b, http.StatusOK, enc, func() any { return want })
		if a.Code != b.Code || !bytes.Equal(a.Body.Bytes(), b.Body.Bytes()) || a.Header().Get("Content-Type") != b.Header().Get("Content-Type") {
			t.Fatalf("%s:\nencoding/json %d %q\nhand          %d %q", what, a.Code, a.Body.Bytes(), b.Code, b.Body.Bytes())
		}
	}
	for round := 0; round < 300; round++ {
		push := make([]pushResult, rng.Intn(3))
		for i := range push {
			push[i] = pushResult{Index: rng.Intn(1000) - 1, MessageID: str(), TransactionID: str(), QueueName: str(), Status: str()}
		}
		check("push", push, func(b []byte) ([]byte, bool) { return appendPushResults(b, push), true })
		acks := make([]ackResult, rng.Intn(3))
		for i := range acks {
			acks[i] = ackResult{Index: i, TransactionID: str(), Success: rng.Intn(2) == 0, LeaseReleased: rng.Intn(2) == 0,
				DLQ: rng.Intn(2) == 0, Noop: rng.Intn(2) == 0}
			if rng.Intn(2) == 0 {
				e := str()
				acks[i].Error = &e
			}
		}
		check("ack", acks, func(b []byte) ([]byte, bool) { return appendAckResults(b, acks), true })
		pop := popResponse{Success: rng.Intn(2) == 0, Queue: str(), Partition: str(), PartitionID: str(), LeaseID: str(),
			ConsumerGroup: str(), PartitionsClaimed: rng.Intn(5)}
		if rng.Intn(5) > 0 {
			pop.Messages = make([]popMessage, rng.Intn(3))
		}
		for i := range pop.Messages {
			m := popMessage{ID: str(), TransactionID: str(), CreatedAt: str(), Queue: str(), PartitionID: str(),
				Partition: str(), LeaseID: str(), ConsumerGroup: str(), DeliveryAttempt: rng.Intn(10)}
			if d := rng.Intn(len(datas) + 1); d < len(datas) {
				m.Data = json.RawMessage(datas[d])
			}
			if rng.Intn(3) == 0 {
				s := str()
				m.TraceID = &s
			}
			if rng.Intn(3) == 0 {
				s := str()
				m.ProducerSub = &s
			}
			pop.Messages[i] = m
		}
		check("pop", pop, func(b []byte) ([]byte, bool) { return appendPopResponse(b, &pop) })
	}
}
