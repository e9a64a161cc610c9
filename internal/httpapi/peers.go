package httpapi

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/hotlistpg"
)

// peerListener holds the one dedicated connection that LISTENs on
// notifyChannel and opens the local gate named by each notification of
// another broker. Received hints are never re-broadcast.
type peerListener struct {
	conn   config.Connection
	log    *slog.Logger
	origin string
	onHint func(queue string)
	// hotlist, when set, also LISTENs on hotlistpg.Channel and gets its
	// payloads; onListen runs each time that LISTEN is in effect.
	hotlist  func(payload string)
	onListen func(ctx context.Context)
	// onMaintenance, when set, also LISTENs on broker.MaintenanceChannel
	// and runs on each notification there and each time LISTEN is in
	// effect (a change made while disconnected is not missed).
	onMaintenance func()
	// ready is closed once LISTEN is in effect for the first time.
	ready chan struct{}
}

// run listens until ctx ends, reconnecting with backoff.
func (p *peerListener) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := p.listen(ctx, &first)
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("peer wake listener lost its connection; reconnecting (parked pops still re-check on their own)", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (p *peerListener) listen(ctx context.Context, first *bool) error {
	cctx, cancel := context.WithTimeout(ctx, p.conn.ConnectTimeout)
	conn, err := db.Connect(cctx, p.conn)
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
	_, err = conn.Exec(lctx, `LISTEN "`+notifyChannel+`"`)
	if err == nil && p.hotlist != nil {
		_, err = conn.Exec(lctx, `LISTEN "`+hotlistpg.Channel+`"`)
	}
	if err == nil && p.onMaintenance != nil {
		_, err = conn.Exec(lctx, `LISTEN "`+broker.MaintenanceChannel+`"`)
	}
	cancel()
	if err != nil {
		return err
	}
	if p.onMaintenance != nil {
		p.onMaintenance()
	}
	if p.onListen != nil {
		p.onListen(ctx)
	}
	if *first {
		*first = false
		close(p.ready)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		p.handle(n)
	}
}

func (p *peerListener) handle(n *pgconn.Notification) {
	if n.Channel == broker.MaintenanceChannel {
		if p.onMaintenance != nil {
			p.onMaintenance()
		}
		return
	}
	if n.Channel == hotlistpg.Channel {
		if p.hotlist != nil {
			p.hotlist(n.Payload)
		}
		return
	}
	origin, queue, ok := strings.Cut(n.Payload, "\x1e")
	if !ok || origin == p.origin || queue == "" {
		return
	}
	p.onHint(queue)
}
