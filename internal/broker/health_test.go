package broker_test

import (
	"testing"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// Ping answers nil on a database with the engine and an error on one
// without it.
func TestPing(t *testing.T) {
	e := setup(t)
	if err := broker.Ping(ctxT(t), e.conn); err != nil {
		t.Fatalf("Ping on an installed engine: %v", err)
	}
	empty := pgtest.Conn(t, pgtest.NewEmptyDB(t))
	if err := broker.Ping(ctxT(t), empty); err == nil {
		t.Fatal("Ping on a database without the engine: nil error, want one")
	}
}
