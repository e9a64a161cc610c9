// Package locks names the advisory locks pgquectl takes, so that the code
// that takes a lock and the code that reports who holds it (status) agree.
package locks

// ClassID is the first key of every two-key advisory lock pgquectl takes
// ('pgqu' as an int4). In pg_locks: locktype = 'advisory', classid = ClassID.
const ClassID int32 = 0x70677175

// Second keys (pg_locks.objid) under ClassID.
const (
	// Install serializes install / uninstall (transaction-scoped).
	Install int32 = 1
	// TickerLeader is held (session-scoped) by the leading `tick --run` daemon.
	TickerLeader int32 = 2
)
