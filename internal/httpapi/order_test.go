package httpapi_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// consume pops with ack until it has seen total messages across all
// consumers (shared counter) or the deadline; it records per partition the
// payload numbers in delivery order.
type orderLog struct {
	mu     sync.Mutex
	byPart map[string][]int
	seen   map[int]int
	total  int
}

func (o *orderLog) add(p *popRes) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range p.Messages {
		o.byPart[m.Partition] = append(o.byPart[m.Partition], payloadN(m))
		o.seen[payloadN(m)]++
		o.total++
	}
}

func (o *orderLog) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// run8 runs 8 concurrent consumers of group on b until want messages were
// taken (each batch acked after it was recorded).
func run8(t *testing.T, b *brokerT, group string, want int) *orderLog {
	t.Helper()
	o := &orderLog{byPart: map[string][]int{}, seen: map[int]int{}}
	deadline := time.Now().Add(90 * time.Second)
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o.count() < want && time.Now().Before(deadline) {
				p := b.pop("/api/v1/pop/queue/q?batch=3&wait=true&timeout=300&consumerGroup=" + group + "&subscriptionMode=all")
				if p == nil {
					continue
				}
				o.add(p)
				acks := make([]map[string]any, len(p.Messages))
				for i, m := range p.Messages {
					acks[i] = ackOf(m, "completed")
				}
				b.ack(group, acks...)
			}
		}()
	}
	wg.Wait()
	return o
}

func (o *orderLog) check(t *testing.T, name string, parts, per int) {
	t.Helper()
	if o.total != parts*per || len(o.seen) != parts*per {
		t.Fatalf("%s: %d deliveries of %d distinct messages, want %d once each", name, o.total, len(o.seen), parts*per)
	}
	for p, got := range o.byPart {
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("%s: partition %s out of order: %v", name, p, got)
			}
		}
	}
}

// Per-partition order under 8 concurrent consumers in queue mode, and
// fan-out to 3 groups (each gets every message once, in order).
func TestOrderUnderConcurrentConsumers(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	const parts, per = 6, 20
	items := make([]map[string]any, 0, parts*per)
	for i := 0; i < per; i++ {
		for p := 0; p < parts; p++ {
			items = append(items, item("q", fmt.Sprint("k", p), map[string]int{"n": p*1000 + i}, ""))
		}
	}
	// Two pushes so that the log spans two ticks.
	b.push(items[:len(items)/2]...)
	b.push(items[len(items)/2:]...)
	run8(t, b, "", parts*per).check(t, "queue mode", parts, per)
	for _, g := range []string{"g1", "g2", "g3"} {
		run8(t, b, g, parts*per).check(t, g, parts, per)
	}
}

// One log, two readers: pushed through HTTP, read by a classic consumer
// (receive / ack) and by a group pop; each sees every message once. The
// group pops need no tick; the classic consumer reads between ticks of
// the scheduled ticker (none runs here: one is made by hand, as pg_cron's
// loop or the ticker daemon would).
func TestOneLogTwoReadersHTTP(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.must(200, "POST", "/api/v1/configure", map[string]any{"queue": "q"}, nil)
	e.exec(`SELECT pgque.subscribe('q', 'classic')`)
	for i := 0; i < 10; i++ {
		b.push(item("q", fmt.Sprint("p", i%3), map[string]int{"n": i}, ""))
	}
	e.exec(`SELECT pgque.force_next_tick('q')`)
	e.exec(`SELECT pgque.ticker('q')`)
	classic := map[int]int{}
	for {
		rows, err := e.conn.Query(ctxT(t), `SELECT batch_id, (payload::jsonb->>'n')::int FROM pgque.receive('q', 'classic', 4)`)
		if err != nil {
			t.Fatal(err)
		}
		var batch int64
		n := 0
		for rows.Next() {
			var v int
			if err := rows.Scan(&batch, &v); err != nil {
				t.Fatal(err)
			}
			classic[v]++
			n++
		}
		rows.Close()
		if n == 0 {
			break
		}
		e.exec(`SELECT pgque.ack($1)`, batch)
	}
	group := map[int]int{}
	for {
		p := b.pop("/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all&autoAck=true&batch=100&partitions=10")
		if p == nil {
			break
		}
		for _, m := range p.Messages {
			group[payloadN(m)]++
		}
	}
	for name, seen := range map[string]map[int]int{"classic": classic, "group": group} {
		if len(seen) != 10 {
			t.Fatalf("%s saw %v", name, seen)
		}
		for v, c := range seen {
			if c != 1 {
				t.Fatalf("%s saw %d %d times", name, v, c)
			}
		}
	}
}
