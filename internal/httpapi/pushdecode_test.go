package httpapi

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
)

// decodePush gives what encoding/json gives for every body it accepts,
// and leaves every other body to encoding/json (escapes, other or
// repeated keys, keys in another case, nulls, bad or trailing JSON).
func TestDecodePushMatchesEncodingJSON(t *testing.T) {
	bodies := []string{
		`{"items":[{"queue":"q","partition":"p","payload":{"seq": 1, "body":"x"},"transactionId":"t1"}]}`,
		` { "items" : [ { "payload" : [1, "a\"b", {"c": [true, false, null]}] , "queue" : "q" } , {"queue":"r","payload":"s\\u00e9"} ] } `,
		`{"items":[]}`, `{"items":[{}]}`, `{"items":[{"payload":12.5e-3,"queue":"q"}]}`, `{"items":[{"payload":"str","queue":"日本"}]}`,
		`{"items":[{"payload":true,"queue":"q"},{"payload":false,"queue":"q"}]}`, `{"items":[{"payload":-0,"queue":"q"}]}`,
		`{"items":[{"payload":null,"queue":"q"}]}`, `{"items":null}`, `{}`, `[]`, `null`, ``, ` `,
		`{"items":[{"queue":"q\"","payload":1}]}`, `{"items":[{"queue":"q\u00e9","payload":1}]}`,
		`{"Items":[{"queue":"q","payload":1}]}`, `{"items":[{"Queue":"q","payload":1}]}`,
		`{"items":[{"queue":"q","queue":"r","payload":1}]}`, `{"items":[{"queue":"q","payload":1,"payload":2}]}`,
		`{"items":[{"queue":"q","payload":1}],"other":1}`, `{"items":[{"queue":"q","payload":1,"x":1}]}`,
		`{"items":[{"queue":"q","payload":1}]} x`, `{"items":[{"queue":"q","payload":1}]}{}`, `{"items":[{"queue":"q","payload":1}]`,
		`{"items":[{"queue":"q","payload":}]}`, `{"items":[{"queue":"q","payload":01}]}`, `{"items":[{"queue":"q","payload":[1,]}]}`,
		`{"items":[{"queue":"q","payload":{"a":1}}}]}`, `{"items":[{"queue":"q","payload":"abc}]}`, `{"items":[{"queue":1,"payload":1}]}`,
		`{"items":[{"queue":"q","payload":1},]}`, `{"items":[{"queue":"q","payload":1}{"queue":"r","payload":2}]}`,
		`{"items":[{"queue":"q" "payload":1}]}`, `{"items":[{"queue":"q","payload":1 2}]}`, `{"items":[{"queue":"q","payload":tru}]}`,
		`{"items":[{"queue":"q","payload":"\\"}]}`, `{"items":[{"queue":"q","partition":null,"payload":1}]}`,
		`{"items":{"queue":"q"}}`, `{"items":[1]}`, `{"items":[{"queue":"q","payload":{"a":{"b":[{}]}}}]}`,
		"{\"items\":[{\"queue\":\"a\tb\",\"payload\":1}]}", "{\"items\":[{\"queue\":\"\xff\",\"payload\":1}]}",
	}
	rng := rand.New(rand.NewSource(2))
	n := len(bodies)
	for i := 0; i < 3000; i++ { // mutations: a byte dropped, doubled or replaced
		b := []byte(bodies[rng.Intn(n)])
		if len(b) == 0 {
			continue
		}
		j := rng.Intn(len(b))
		switch rng.Intn(3) {
		case 0:
			b = append(b[:j:j], b[j+1:]...)
		case 1:
			b = append(b[:j+1:j+1], b[j:]...)
		default:
			b[j] = `{}[]",: 1an\"e`[rng.Intn(14)]
		}
		bodies = append(bodies, string(b))
	}
	fast := 0
	for _, body := range bodies {
		got, ok := decodePush([]byte(body))
		if !ok {
			continue
		}
		fast++
		var want pushRequest
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		if err := dec.Decode(&want); err != nil || dec.More() {
			t.Fatalf("%q: decodePush accepted it, encoding/json: %v (trailing data: %v)", body, err, dec.More())
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\ndecodePush    %s\nencoding/json %s", body, show(got), show(want))
		}
	}
	if fast < 10 {
		t.Fatalf("decodePush took only %d bodies", fast)
	}
}

func show(r pushRequest) string {
	b, _ := json.Marshal(r)
	return string(b)
}
