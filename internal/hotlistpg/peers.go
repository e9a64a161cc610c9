package hotlistpg

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/hotlist"
)

// Channel is the NOTIFY channel of hot-list peers (dirty hints and
// hellos). Only brokers with the hot-list on LISTEN on it. Like the
// broker's wake channel it holds a dot, so no engine channel
// (pgque_<queue>) collides with it.
const Channel = "pgque.hotlist"

// Defaults of the transport.
const (
	// DefaultHello is how often a broker announces itself on Channel.
	DefaultHello = 5 * time.Second
	// payloadMax keeps a NOTIFY payload under PostgreSQL's 8000 bytes.
	payloadMax = 7500
)

// Payloads: "<origin>\x1eH" (hello) or "<origin>\x1eJ<json>" where json is
// [[key, partition, id], ...].
const (
	sepOrigin = "\x1e"
	kindHello = "H"
	kindHints = "J"
)

// Transport is hotlist.PeerTransport over LISTEN / NOTIFY. Sending runs
// on the pool (one statement per batch, several notifications); the
// broker's peer listener connection LISTENs on Channel and hands each
// payload to Receive. A broker learns its peers from their hellos (every
// Hello; a peer unheard for three periods is gone): while it has none,
// the hot-list collects no hints at all.
type Transport struct {
	db     broker.Querier
	origin string
	hello  time.Duration
	log    *slog.Logger

	mu    sync.Mutex
	peers map[string]time.Time // origin → last heard
	recv  func([]hotlist.Hint)

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ hotlist.PeerTransport = (*Transport)(nil)

// NewTransport returns a transport sending through db as origin (the
// broker's random id, also used by its wake notifications). hello 0 =
// DefaultHello.
func NewTransport(db broker.Querier, origin string, hello time.Duration, log *slog.Logger) *Transport {
	if hello <= 0 {
		hello = DefaultHello
	}
	if log == nil {
		log = slog.Default()
	}
	return &Transport{db: db, origin: origin, hello: hello, log: log, peers: map[string]time.Time{}}
}

func (t *Transport) setReceiver(f func([]hotlist.Hint)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recv = f
}

// HasPeers reports whether another hot-list broker said hello recently.
func (t *Transport) HasPeers() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := time.Now().Add(-3 * t.hello)
	for o, at := range t.peers {
		if at.Before(limit) {
			delete(t.peers, o)
			continue
		}
		return true
	}
	return false
}

type wireHint struct {
	Key  string
	Part string
	ID   int32
}

func (w wireHint) MarshalJSON() ([]byte, error) { return json.Marshal([]any{w.Key, w.Part, w.ID}) }

func (w *wireHint) UnmarshalJSON(b []byte) error {
	var a [3]json.RawMessage
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if err := json.Unmarshal(a[0], &w.Key); err != nil {
		return err
	}
	if err := json.Unmarshal(a[1], &w.Part); err != nil {
		return err
	}
	return json.Unmarshal(a[2], &w.ID)
}

// encode packs hints into payloads of at most payloadMax bytes.
func (t *Transport) encode(hints []hotlist.Hint) []string {
	prefix := t.origin + sepOrigin + kindHints
	var out []string
	var cur []string
	size := len(prefix) + 2
	flush := func() {
		if len(cur) > 0 {
			out = append(out, prefix+"["+strings.Join(cur, ",")+"]")
			cur, size = nil, len(prefix)+2
		}
	}
	for _, h := range hints {
		b, err := json.Marshal(wireHint{Key: h.Key, Part: h.Partition, ID: h.ID})
		if err != nil || len(prefix)+len(b)+2 > payloadMax {
			continue // a name too long for one notification: the reseed floor finds it
		}
		if size+len(b)+1 > payloadMax {
			flush()
		}
		cur = append(cur, string(b))
		size += len(b) + 1
	}
	flush()
	return out
}

// SendHints notifies Channel with the hints (one statement).
func (t *Transport) SendHints(ctx context.Context, hints []hotlist.Hint) error {
	payloads := t.encode(hints)
	if len(payloads) == 0 {
		return nil
	}
	if _, err := t.db.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) p`, Channel, payloads); err != nil {
		return fmt.Errorf("notifying peer brokers on %s: %w", Channel, err)
	}
	return nil
}

// Hello announces this broker to its peers.
func (t *Transport) Hello(ctx context.Context) error {
	if _, err := t.db.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, t.origin+sepOrigin+kindHello); err != nil {
		return fmt.Errorf("announcing this broker on %s: %w", Channel, err)
	}
	return nil
}

// Receive handles one notification payload of Channel: a hello records
// the peer; hints are handed to the hot-list (never sent on). Our own
// notifications and malformed payloads are ignored.
func (t *Transport) Receive(payload string) {
	origin, body, ok := strings.Cut(payload, sepOrigin)
	if !ok || origin == t.origin || body == "" {
		return
	}
	t.mu.Lock()
	t.peers[origin] = time.Now()
	recv := t.recv
	t.mu.Unlock()
	if body[:1] != kindHints || recv == nil {
		return
	}
	var ws []wireHint
	if err := json.Unmarshal([]byte(body[1:]), &ws); err != nil {
		t.log.Warn("hot-list: ignoring a malformed peer hint payload", "err", err)
		return
	}
	hints := make([]hotlist.Hint, len(ws))
	for i, w := range ws {
		hints[i] = hotlist.Hint{Key: w.Key, Partition: w.Part, ID: w.ID}
	}
	recv(hints)
}

// Listening is called by the listener each time LISTEN on Channel is in
// effect (first start and reconnects): the peers learn of us at once.
func (t *Transport) Listening(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := t.Hello(hctx); err != nil && ctx.Err() == nil {
		t.log.Warn("hot-list: hello to peer brokers failed; retrying at the next period", "err", err)
	}
}

func (t *Transport) start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	t.mu.Lock()
	t.cancel = cancel
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		tk := time.NewTicker(t.hello)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				t.Listening(ctx)
			}
		}
	}()
}

func (t *Transport) stop() {
	t.mu.Lock()
	cancel := t.cancel
	t.cancel = nil
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		t.wg.Wait()
	}
}
