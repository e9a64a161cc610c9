// Package notifier holds one dedicated PostgreSQL connection that LISTENs
// on a set of channels and hands each notification to its channel's
// handler. It reconnects with backoff when the connection is lost; OnListen
// runs each time the LISTENs are in effect again, so a caller can re-read
// what changed while it was disconnected.
package notifier

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/db"
)

// Subscription is one channel and the handler of its payloads.
type Subscription struct {
	Channel string
	Handle  func(payload string)
}

// Listener LISTENs on Subs (in their order) over one connection of Conn
// until Run's context ends.
type Listener struct {
	Conn config.Connection
	Log  *slog.Logger
	Subs []Subscription
	// OnListen, when set, runs each time every LISTEN is in effect (the
	// first connection and each reconnection), before any notification is
	// handled.
	OnListen func(ctx context.Context)
	// Ready, when set, is closed once LISTEN is in effect for the first
	// time.
	Ready chan struct{}
}

// Run listens until ctx ends, reconnecting with backoff.
func (l *Listener) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := l.listen(ctx, &first)
		if ctx.Err() != nil {
			return
		}
		l.Log.Warn("peer wake listener lost its connection; reconnecting (parked pops still re-check on their own)", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (l *Listener) listen(ctx context.Context, first *bool) error {
	cctx, cancel := context.WithTimeout(ctx, l.Conn.ConnectTimeout)
	conn, err := db.Connect(cctx, l.Conn)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	for _, s := range l.Subs {
		if _, err = conn.Exec(lctx, `LISTEN `+pgx.Identifier{s.Channel}.Sanitize()); err != nil {
			break
		}
	}
	cancel()
	if err != nil {
		return err
	}
	if l.OnListen != nil {
		l.OnListen(ctx)
	}
	if *first {
		*first = false
		if l.Ready != nil {
			close(l.Ready)
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		for _, s := range l.Subs {
			if s.Channel == n.Channel {
				s.Handle(n.Payload)
				break
			}
		}
	}
}
