package hotlistpg_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/hotlist"
	"github.com/pgquectl/pgquectl/internal/hotlistpg"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// quietSource: a connection to a fresh database and a source on it whose
// background work (reseeds, sweeps, log lines) does not run during a test.
func quietSource(t *testing.T) (*pgx.Conn, *hotlistpg.Source) {
	t.Helper()
	c := pgtest.Conn(t, pgtest.NewDB(t))
	return c, hotlistpg.New(hotlistpg.Config{DB: c, Options: hotlist.Options{LogInterval: -1,
		ReseedInterval: time.Hour, ReseedPhase: time.Hour, SweepInterval: time.Hour}})
}

// The reseed floor lists a partition that got work after the group
// subscribed, before the group ever claimed from it (no cursor yet).
func TestReseedFindsWorkWithoutCursor(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	c := pgtest.Conn(t, dsn)
	ctx := ctxT(t)
	tick := func() {
		if _, err := c.Exec(ctx, `WITH f AS MATERIALIZED (SELECT pgque.force_next_tick('q') AS t) SELECT pgque.ticker('q') FROM f`); err != nil {
			t.Fatal(err)
		}
	}
	items := []broker.Item{{Queue: "q", Partition: "a", Payload: json.RawMessage(`1`)}, {Queue: "q", Partition: "b", Payload: json.RawMessage(`2`)}}
	if _, err := broker.Push(ctx, c, items); err != nil {
		t.Fatal(err)
	}
	tick()
	// Subscribe g ("new": the set-up messages are not its).
	if _, err := broker.PopList(ctx, c, broker.Pop{Queue: "q", Group: "g", Batch: 1, SubscriptionMode: "new"}, []int32{}); err != nil {
		t.Fatal(err)
	}
	rows, err := broker.Reseed(ctx, c, "q", "g", -1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Fatalf("before any new push: %+v", rows)
	}
	tick()
	if _, err := broker.Push(ctx, c, items[1:]); err != nil {
		t.Fatal(err)
	}
	tick()
	rows, err = broker.Reseed(ctx, c, "q", "g", -1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Partition != "b" {
		t.Fatalf("after a push to b: %+v", rows)
	}
}
