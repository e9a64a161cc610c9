package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// statInterval is PostgreSQL 14's PGSTAT_STAT_INTERVAL (500 ms) with a
// margin: a backend sends its counters at most that often, and a reader
// accepts a statistics file up to that old.
const statInterval = 600 * time.Millisecond

// FlushStats makes the table counters (inserts, dead tuples, …) of the
// work conn has done so far visible to new transactions of every session.
// conn must be outside a transaction. PostgreSQL 15+ has
// pg_stat_force_next_flush(); on 14 it waits for the statistics collector:
// a statement after PGSTAT_STAT_INTERVAL sends the counters, and once that
// interval passed again no reader accepts a statistics file from before.
func FlushStats(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var version int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatalf("pgtest: reading the server version: %v", err)
	}
	if version >= 150000 {
		// Flushes at the end of this (implicit) transaction.
		if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatalf("pgtest: pg_stat_force_next_flush(): %v", err)
		}
		return
	}
	time.Sleep(statInterval)
	if _, err := conn.Exec(ctx, `SELECT 1`); err != nil { // idle again: sends the counters
		t.Fatalf("pgtest: flushing statistics: %v", err)
	}
	time.Sleep(statInterval)
}
