package sql_test

import (
	"fmt"
	"testing"
	"time"
)

// TestMaintRotatesEventTables: maint() alone, as pg_cron and the ticker
// daemon call it, switches a queue through all its event tables and
// empties the ones no consumer needs, losing nothing. On PostgreSQL 14 this
// failed with "function min(xid8) does not exist" (min(xid8) is 15+), so
// the event tables there grew forever. scripts/test.sh runs it on 14–18.
func TestMaintRotatesEventTables(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_queue_config('q', 'rotation_period', '0')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	ntables := int(e.int64(`SELECT queue_ntables FROM pgque.queue WHERE queue_name = 'q'`))
	if ntables < 2 {
		t.Fatalf("queue_ntables = %d", ntables)
	}

	var sent, got []string
	tables := map[int64]bool{e.int64(`SELECT queue_cur_table FROM pgque.queue WHERE queue_name = 'q'`): true}
	switches := 0
	var sentAtSwitch []int // len(sent) when switch i+1 happened
	// Each round: maint(), one event, a tick, the consumer catches up.
	// Transactions of parallel tests can hold the snapshot xmin back and
	// delay a switch, hence rounds until a deadline rather than a count.
	deadline := time.Now().Add(90 * time.Second)
	for round := 0; switches < ntables+1 && time.Now().Before(deadline); round++ {
		before := e.int64(`SELECT queue_cur_table FROM pgque.queue WHERE queue_name = 'q'`)
		e.int64(`SELECT pgque.maint()`)
		after := e.int64(`SELECT queue_cur_table FROM pgque.queue WHERE queue_name = 'q'`)
		if after != before {
			switches++
			sentAtSwitch = append(sentAtSwitch, len(sent))
			tables[after] = true
		}
		p := fmt.Sprint("e", round)
		e.exec(`SELECT pgque.send('q', $1::text)`, p)
		sent = append(sent, p)
		e.tick("q")
		got = append(got, e.drain("q", "c", 100)...)
		time.Sleep(10 * time.Millisecond)
	}
	if switches < ntables+1 {
		t.Fatalf("maint() switched event tables %d times before the deadline, want %d", switches, ntables+1)
	}
	if len(tables) != ntables {
		t.Errorf("inserts went to %d distinct tables, want all %d", len(tables), ntables)
	}
	exactlyOnce(t, got, sent)
	// Switch k truncates the table it moves into, so what is left is exactly
	// the events sent since switch (switches - ntables + 1).
	want := len(sent) - sentAtSwitch[switches-ntables]
	id := e.int64(`SELECT queue_id FROM pgque.queue WHERE queue_name = 'q'`)
	var rows int64
	for n := 0; n < ntables; n++ {
		rows += e.int64(fmt.Sprintf(`SELECT count(*) FROM pgque.event_%d_%d`, id, n))
	}
	if rows != int64(want) {
		t.Errorf("event tables hold %d rows after %d switches, want %d (the events since switch %d)", rows, switches, want, switches-ntables+1)
	}
}
