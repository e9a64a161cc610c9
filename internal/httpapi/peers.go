package httpapi

import (
	"context"
	"log/slog"
	"strings"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/hotlistpg"
	"github.com/pgquectl/pgquectl/internal/notifier"
)

// peerListener is the one dedicated connection (internal/notifier) that
// LISTENs on notifyChannel and opens the local gate named by each
// notification of another broker. Received hints are never re-broadcast.
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
	l := &notifier.Listener{Conn: p.conn, Log: p.log, Ready: p.ready,
		Subs: []notifier.Subscription{{Channel: notifyChannel, Handle: p.handleHint}}}
	if p.hotlist != nil {
		l.Subs = append(l.Subs, notifier.Subscription{Channel: hotlistpg.Channel, Handle: p.hotlist})
	}
	if p.onMaintenance != nil {
		l.Subs = append(l.Subs, notifier.Subscription{Channel: broker.MaintenanceChannel, Handle: func(string) { p.onMaintenance() }})
	}
	l.OnListen = func(ctx context.Context) {
		if p.onMaintenance != nil {
			p.onMaintenance()
		}
		if p.onListen != nil {
			p.onListen(ctx)
		}
	}
	l.Run(ctx)
}

// handleHint opens the gate of a notification's queue unless this broker
// sent it (payload: the sender's id, 0x1e, the stored queue name).
func (p *peerListener) handleHint(payload string) {
	origin, queue, ok := strings.Cut(payload, "\x1e")
	if !ok || origin == p.origin || queue == "" {
		return
	}
	p.onHint(queue)
}
