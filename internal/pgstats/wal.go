package pgstats

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgquectl/pgquectl/internal/db"
)

// LSN is a WAL position (pg_lsn) as a byte offset.
type LSN uint64

// ParseLSN parses PostgreSQL's "XXXXXXXX/XXXXXXXX" text form.
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("pgstats: parsing LSN %q: missing '/'", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("pgstats: parsing LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("pgstats: parsing LSN %q: %w", s, err)
	}
	return LSN(h<<32 | l), nil
}

// String formats l the way PostgreSQL does.
func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint64(l)>>32, uint32(l)) }

// MarshalText makes LSN render as text in JSON.
func (l LSN) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses the text form.
func (l *LSN) UnmarshalText(b []byte) error {
	v, err := ParseLSN(string(b))
	*l = v
	return err
}

// WALPoint is one reading of the WAL position and the counters that go with it.
type WALPoint struct {
	LSN     LSN       `json:"lsn"`
	Time    time.Time `json:"time"`     // server clock_timestamp() at the reading
	NextXID uint64    `json:"next_xid"` // xmax of the current snapshot: the next xid to be assigned
	// Cumulative pg_stat_wal counters (they lag ~1 s; zero before PostgreSQL 14).
	Records int64 `json:"records"`
	FPI     int64 `json:"fpi"`
	Bytes   int64 `json:"bytes"`
}

// QueryWALPoint reads the WAL insert position (the replay position on a
// standby), the server clock, the next xid and pg_stat_wal in one statement.
// It writes nothing and assigns no xid.
const QueryWALPoint = `
SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text,
       clock_timestamp(),
       pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
       w.wal_records, w.wal_fpi, w.wal_bytes::bigint
  FROM pg_stat_wal w`

// ReadWAL takes one [WALPoint].
func ReadWAL(ctx context.Context, q db.Querier) (WALPoint, error) {
	var p WALPoint
	var lsn *string
	var xid int64
	if err := queryOne(ctx, q, "reading the WAL position", QueryWALPoint, nil,
		&lsn, &p.Time, &xid, &p.Records, &p.FPI, &p.Bytes); err != nil {
		return p, err
	}
	if lsn == nil {
		return p, fmt.Errorf("pgstats: reading the WAL position: the server reported none (a standby that has not replayed yet?)")
	}
	l, err := ParseLSN(*lsn)
	if err != nil {
		return p, err
	}
	p.LSN, p.NextXID = l, uint64(xid)
	return p, nil
}

// WALRate is what happened between two [WALPoint]s.
type WALRate struct {
	From        WALPoint `json:"from"`
	To          WALPoint `json:"to"`
	Seconds     float64  `json:"seconds"`
	Bytes       int64    `json:"bytes"`         // LSN delta: exact
	BytesPerSec float64  `json:"bytes_per_sec"` // Bytes / Seconds
	XIDs        int64    `json:"xids"`          // xids assigned in between
	XIDsPerSec  float64  `json:"xids_per_sec"`
	Records     int64    `json:"records"` // pg_stat_wal deltas (approximate: stats lag)
	FPI         int64    `json:"fpi"`
}

// Rate computes the rates between from and to (to taken later).
func Rate(from, to WALPoint) WALRate {
	r := WALRate{From: from, To: to, Seconds: to.Time.Sub(from.Time).Seconds()}
	r.Bytes = int64(to.LSN) - int64(from.LSN)
	r.XIDs = int64(to.NextXID) - int64(from.NextXID)
	r.Records = to.Records - from.Records
	r.FPI = to.FPI - from.FPI
	if r.Seconds > 0 {
		r.BytesPerSec = float64(r.Bytes) / r.Seconds
		r.XIDsPerSec = float64(r.XIDs) / r.Seconds
	}
	return r
}

// SampleWAL reads the WAL position, waits d (or until ctx ends) and reads it
// again. Use ReadWAL + Rate directly to sample around other work.
func SampleWAL(ctx context.Context, q db.Querier, d time.Duration) (WALRate, error) {
	from, err := ReadWAL(ctx, q)
	if err != nil {
		return WALRate{}, err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return WALRate{}, fmt.Errorf("pgstats: sampling WAL: %w", ctx.Err())
	case <-t.C:
	}
	to, err := ReadWAL(ctx, q)
	if err != nil {
		return WALRate{}, err
	}
	return Rate(from, to), nil
}

// TickWALBytesEstimate is the WAL one tick of a queue with new events
// writes (tick row, its index entry, the commit record), used to estimate
// the ticking share of a WAL sample. Measured on PostgreSQL 15 with the
// pgque engine at a 10 ms period: 236–245 B per tick (see docs/reference/status.md).
const TickWALBytesEstimate = 240
