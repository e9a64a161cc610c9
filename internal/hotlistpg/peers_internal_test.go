package hotlistpg

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/hotlist"
	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// Hints survive the NOTIFY payload round trip (control bytes, tenant
// keys, ids), split into payloads under PostgreSQL's 8000-byte limit; a
// broker ignores its own notifications and learns peers from hellos.
func TestTransportPayloads(t *testing.T) {
	t.Parallel()
	a := NewTransport(nil, "aaaa", time.Hour, nil)
	b := NewTransport(nil, "bbbb", time.Hour, nil)
	var got []hotlist.Hint
	b.setReceiver(func(h []hotlist.Hint) { got = append(got, h...) })
	var sent []hotlist.Hint
	for i := range 1000 {
		sent = append(sent, hotlist.Hint{Key: queuekey.Make("t", fmt.Sprintf("queue-%d", i%7)),
			Partition: fmt.Sprintf("p\"\x01\\-%d", i), ID: int32(i - 1)})
	}
	payloads := a.encode(sent)
	if len(payloads) < 2 {
		t.Fatalf("1,000 hints in %d payload(s): not split", len(payloads))
	}
	for _, p := range payloads {
		if len(p) > payloadMax || strings.ContainsRune(p, 0) {
			t.Fatalf("payload of %d bytes (max %d) or with a NUL", len(p), payloadMax)
		}
		a.Receive(p) // own: ignored
		b.Receive(p)
	}
	if len(got) != len(sent) {
		t.Fatalf("received %d hints, want %d", len(got), len(sent))
	}
	for i := range sent {
		if got[i] != sent[i] {
			t.Fatalf("hint %d: got %+v, want %+v", i, got[i], sent[i])
		}
	}
	if a.HasPeers() {
		t.Fatal("A heard only itself, yet has peers")
	}
	if !b.HasPeers() {
		t.Fatal("B received A's hints, yet has no peer")
	}
	a.Receive("bbbb" + sepOrigin + kindHello)
	if !a.HasPeers() {
		t.Fatal("A heard B's hello, yet has no peer")
	}
	a.mu.Lock()
	a.peers["bbbb"] = time.Now().Add(-4 * time.Hour) // three hello periods ago and more
	a.mu.Unlock()
	if a.HasPeers() {
		t.Fatal("a peer silent for three hello periods still counts")
	}
	b.Receive("garbage")
	b.Receive("cccc" + sepOrigin + kindHints + "[not json")
	if len(got) != len(sent) {
		t.Fatal("malformed payloads delivered hints")
	}
}
