package locks_test

import (
	"testing"

	"github.com/pgquectl/pgquectl/internal/locks"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestIDsAreTheEngines: every constant of this package is the engine's id
// (pgque.lock_id_*(), sql/engine/040_lock_ids.sql), every engine id has a
// constant here, and the numbers are those existing installs and running
// tickers use (ClassID 'pgqu').
func TestIDsAreTheEngines(t *testing.T) {
	t.Parallel()
	conn := pgtest.Conn(t, pgtest.NewDB(t))
	want := map[string]int32{
		"lock_id_class":                     locks.ClassID,
		"lock_id_install":                   locks.Install,
		"lock_id_ticker_leader":             locks.TickerLeader,
		"lock_id_metadata_rotation":         locks.MetadataRotation,
		"lock_id_ticker_loop":               locks.TickerLoop,
		"lock_id_ticking":                   locks.Ticking,
		"lock_id_queue_tick_class":          locks.QueueTickClassID,
		"lock_id_subscription_batch_class":  locks.SubscriptionBatchClassID,
		"lock_id_partition_intern_class":    locks.PartitionInternClassID,
		"lock_id_push_partition_class":      locks.PushPartitionClassID,
		"lock_id_group_seed_class":          locks.GroupSeedClassID,
		"lock_id_subscription_reader_class": locks.SubscriptionReaderClassID,
	}
	if locks.ClassID != 1885827445 {
		t.Fatalf("ClassID %d: existing installs use 1885827445 ('pgqu')", locks.ClassID)
	}
	rows, err := conn.Query(t.Context(), `SELECT p.proname FROM pg_proc p
	                                       WHERE p.pronamespace = 'pgque'::regnamespace AND p.proname ~ '^lock_id_'
	                                       ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) != len(want) {
		t.Errorf("the engine has %d lock ids (%v), this package %d", len(names), names, len(want))
	}
	for _, n := range names {
		w, ok := want[n]
		if !ok {
			t.Errorf("pgque.%s() has no constant in internal/locks", n)
			continue
		}
		var got int32
		if err := conn.QueryRow(t.Context(), `SELECT pgque.`+n+`()`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("pgque.%s() = %d, internal/locks says %d", n, got, w)
		}
	}
}
