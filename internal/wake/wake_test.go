package wake

import (
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/queuekey"
)

func TestSignalWakesWaitersOfItsKeyOnly(t *testing.T) {
	g := New()
	a1, ra1 := g.Wait(queuekey.Make("", "a"))
	a2, ra2 := g.Wait(queuekey.Make("", "a"))
	b, rb := g.Wait(queuekey.Make("", "b"))
	if n := g.Waiting(); n != 3 {
		t.Fatalf("waiting %d", n)
	}
	if !g.Signal(queuekey.Make("", "a")) {
		t.Fatal("no waiter on a")
	}
	for _, ch := range []<-chan struct{}{a1, a2} {
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatal("waiter of a not woken")
		}
	}
	select {
	case <-b:
		t.Fatal("waiter of b woken")
	default:
	}
	ra1()
	ra2()
	ra2() // idempotent
	if n := g.Waiting(); n != 1 {
		t.Fatalf("waiting after release: %d", n)
	}
	rb()
	if n := g.Waiting(); n != 0 || g.Signal(queuekey.Make("", "b")) {
		t.Fatalf("released gates remain: %d", n)
	}
	// A signal between Wait and the check is not lost: the channel taken
	// before is closed.
	c, rc := g.Wait(queuekey.Make("t", "q"))
	g.Signal(queuekey.Make("t", "q"))
	select {
	case <-c:
	default:
		t.Fatal("signal after Wait lost")
	}
	rc()
}
