package ticker

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestDaemonSessionCommitsAsynchronously: the daemon's session ticks with
// synchronous_commit = off (a tick's COMMIT does not wait for the WAL
// flush, which is on the delivery path), and keeps its statement and lock
// timeouts.
func TestDaemonSessionCommitsAsynchronously(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{ConnConfig: cc, Period: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := d.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var sync, lt string
	if err := conn.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('lock_timeout')`).Scan(&sync, &lt); err != nil {
		t.Fatal(err)
	}
	if sync != "off" {
		t.Errorf("the daemon's session has synchronous_commit %q, want off", sync)
	}
	if lt != "100ms" {
		t.Errorf("the daemon's session has lock_timeout %q, want 100ms", lt)
	}
}
