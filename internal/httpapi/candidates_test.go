package httpapi_test

import (
	"context"
	"sync"
	"testing"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// recorder is a CandidateSource that records what the server tells it and
// delegates pops to the SQL scan: the hot-list's seam.
type recorder struct {
	mu     sync.Mutex
	pops   int
	events []broker.Event
}

func (r *recorder) Pop(ctx context.Context, q broker.Querier, p broker.Pop) (broker.PopResult, error) {
	r.mu.Lock()
	r.pops++
	r.mu.Unlock()
	return broker.SQLScan{}.Pop(ctx, q, p)
}

func (r *recorder) Note(ev broker.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func TestCandidateSourceSeam(t *testing.T) {
	e := setup(t)
	rec := &recorder{}
	b := e.start(httpapi.Config{Candidates: rec})
	res := b.push(item("q", "a", 1, ""), item("q", "b", 2, ""))
	p := b.pop("/api/v1/pop/queue/q?batch=10&partitions=2")
	if p == nil || len(p.Messages) != 2 {
		t.Fatalf("pop: %+v", p)
	}
	b.ack("", ackOf(p.Messages[0], "completed"), ackOf(p.Messages[1], "completed"))
	b.pop("/api/v1/pop/queue/q/partition/a") // not a wildcard pop
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.pops != 1 {
		t.Fatalf("wildcard pops through the source: %d, want 1", rec.pops)
	}
	var pushed, acked int
	for _, ev := range rec.events {
		switch ev.Kind {
		case broker.EventPushed:
			pushed++
			if ev.Queue != "q" || len(ev.Partitions) != 2 {
				t.Fatalf("pushed event: %+v (push %+v)", ev, res)
			}
		case broker.EventAcked:
			acked++
			if ev.Queue != "q" || len(ev.Partitions) != 2 {
				t.Fatalf("acked event: %+v", ev)
			}
		}
	}
	if pushed != 1 || acked != 1 {
		t.Fatalf("events: %+v", rec.events)
	}
}
