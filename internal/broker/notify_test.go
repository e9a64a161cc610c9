package broker_test

import (
	"testing"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// SendNotify sends Prefix + the queue name on Channel; a listener on
// another connection receives it once the statement (autocommit) ends.
func TestSendNotify(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	listener := pgtest.Conn(t, e.dsn)
	if _, err := listener.Exec(ctx, `LISTEN "pgque.test"`); err != nil {
		t.Fatal(err)
	}
	if err := broker.SendNotify(ctx, e.conn, broker.Notify{Channel: "pgque.test", Prefix: "b1\x1e"}, "q1"); err != nil {
		t.Fatalf("SendNotify: %v", err)
	}
	n, err := listener.WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("waiting for the notification: %v", err)
	}
	if n.Channel != "pgque.test" || n.Payload != "b1\x1eq1" {
		t.Fatalf("got %q on %q, want %q on %q", n.Payload, n.Channel, "b1\x1eq1", "pgque.test")
	}
}
