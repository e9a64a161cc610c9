package notifier_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/notifier"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// Each channel's payloads reach its own handler; after the connection is
// killed the listener reconnects, runs OnListen again and still delivers.
func TestListenerDeliversAndReconnects(t *testing.T) {
	dsn := pgtest.NewEmptyDB(t)
	ctx := pgtest.Ctx(t)
	a, b := make(chan string, 4), make(chan string, 4)
	listening := make(chan struct{}, 4)
	ready := make(chan struct{})
	l := &notifier.Listener{
		Conn: config.Connection{DSN: dsn, ConnectTimeout: 10 * time.Second, ApplicationName: "notifier-test"},
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Subs: []notifier.Subscription{
			{Channel: "test.a", Handle: func(p string) { a <- p }},
			{Channel: "test.b", Handle: func(p string) { b <- p }},
		},
		OnListen: func(context.Context) { listening <- struct{}{} },
		Ready:    ready,
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(rctx) }()
	defer func() { cancel(); <-done }()
	recv := func(ch chan string, want string) {
		t.Helper()
		select {
		case got := <-ch:
			if got != want {
				t.Fatalf("payload %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("no payload %q: %v", want, ctx.Err())
		}
	}
	<-ready
	<-listening
	sender := pgtest.Conn(t, dsn)
	pgtest.Exec(t, dsn, `SELECT pg_notify('test.a', 'one'), pg_notify('test.b', 'two')`)
	recv(a, "one")
	recv(b, "two")

	if _, err := sender.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'notifier-test' AND datname = current_database()`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-listening:
	case <-ctx.Done():
		t.Fatalf("no reconnection: %v", ctx.Err())
	}
	pgtest.Exec(t, dsn, `SELECT pg_notify('test.b', 'three')`)
	recv(b, "three")
}
