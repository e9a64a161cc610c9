package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The hand-encoded bodies are the JSON encoding/json writes for the same
// values (strings with quotes, backslashes, control characters, non-ASCII
// and invalid UTF-8 included), in the shape Queen's clients send.
func TestHandEncodedBodies(t *testing.T) {
	odd := "q\"\\\n\t\x01é€\xff"
	items := []pushItem{{Queue: odd, Partition: "k01", Seq: 7, Body: "xx"}, {Queue: "q", Partition: odd, Seq: -1}}
	var got any
	if err := json.Unmarshal(appendPushBody(nil, items), &got); err != nil {
		t.Fatalf("push body is not JSON: %v: %s", err, appendPushBody(nil, items))
	}
	type payload struct {
		Seq  int64  `json:"seq"`
		Body string `json:"body"`
	}
	type item struct {
		Queue     string  `json:"queue"`
		Partition string  `json:"partition"`
		Payload   payload `json:"payload"`
	}
	want := roundTrip(t, map[string]any{"items": []item{{odd, "k01", payload{7, "xx"}}, {"q", odd, payload{-1, ""}}}})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("push body\n got %v\nwant %v", got, want)
	}

	u := newUUID4(0x0123456789abcdef, 0xfedcba9876543210)
	raw := appendPushBody(nil, []pushItem{{Queue: "q", Partition: "p", Seq: 1, TxID: u}})
	if want := `{"items":[{"queue":"q","partition":"p","payload":{"seq":1,"body":""},"transactionId":"01234567-89ab-4def-bedc-ba9876543210"}]}`; string(raw) != want {
		t.Errorf("push body with a transactionId\n got %s\nwant %s", raw, want)
	}

	msgs := []message{{TransactionID: odd, PartitionID: "p1", LeaseID: "l1"}, {TransactionID: "t2"}}
	for _, group := range []string{"", "g\"1"} {
		if err := json.Unmarshal(appendAckBody(nil, group, msgs), &got); err != nil {
			t.Fatalf("ack body is not JSON: %v: %s", err, appendAckBody(nil, group, msgs))
		}
		var g any
		if group != "" {
			g = group
		}
		want := roundTrip(t, map[string]any{"consumerGroup": g, "acknowledgments": []map[string]any{
			{"transactionId": odd, "status": "completed", "error": nil, "partitionId": "p1", "leaseId": "l1"},
			{"transactionId": "t2", "status": "completed", "error": nil},
		}})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ack body (group %q)\n got %v\nwant %v", group, got, want)
		}
	}
}

func roundTrip(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseServerTiming(t *testing.T) {
	for in, want := range map[string]serverTiming{
		"db;dur=1.5, park;dur=2":        {db: 1.5, park: 2},
		"park;desc=x;dur=0.25,db;dur=3": {db: 3, park: 0.25},
		"db;dur=x, other;dur=9":         {},
		"":                              {},
	} {
		if got := parseServerTiming([]byte(in)); got != want {
			t.Errorf("%q: %+v, want %+v", in, got, want)
		}
	}
}
