// Package locks names the advisory locks pgquectl and its SQL engine take,
// so that the code that takes a lock and the code that reports who holds it
// (status) agree. All are two-key advisory locks: in pg_locks, locktype =
// 'advisory', classid = the first key, objid = the second, objsubid = 2.
//
// The ids' home is the engine: sql/engine/040_lock_ids.sql, one inlinable
// function pgque.lock_id_<name>() per id. The constants here are the same
// numbers for Go; TestIDsAreTheEngines fails when one differs or when the
// engine has an id this package does not name.
package locks

// ClassID is the first key of pgquectl's own locks ('pgqu' as an int4).
const ClassID int32 = 0x70677175

// Second keys (pg_locks.objid) under ClassID.
const (
	// Install serializes install / uninstall (transaction-scoped).
	Install int32 = 1
	// TickerLeader is held (session-scoped) by the leading `tick --run` daemon.
	TickerLeader int32 = 2
	// MetadataRotation is try-locked (transaction-scoped) by
	// pgque.rotate_metadata(): one rotation at a time.
	MetadataRotation int32 = 4
	// TickerLoop is held (session-scoped) by a running pgque.ticker_loop()
	// for its whole run: "the pg_cron loop is alive". A standby (the
	// `tick --run` daemon, `serve`) ticks only while nobody holds it.
	TickerLoop int32 = 5
	// Ticking is held shared (transaction-scoped) by every pgque.ticker()
	// call: it tells a tick's pg_locks reading (pgque.tick_in_flight) that
	// this transaction is a ticker, which reads every queue's event
	// sequence without producing events.
	Ticking int32 = 6
)

// QueueTickClassID is the first key of a queue's tick lock; the second is
// the queue id. The ticker try-locks it (transaction-scoped) and skips the
// queue when it is held; configuration changes, consumer registration and
// event-table rotation take it.
const QueueTickClassID int32 = ClassID + 1

// SubscriptionBatchClassID is the first key of a subscription's batch lock;
// the second is the subscription id. receive, ack, nack, next_batch and
// finish_batch take it (transaction-scoped) so one consumer's batch
// operations run one at a time, without row locks (no WAL).
const SubscriptionBatchClassID int32 = ClassID + 2

// PartitionInternClassID is the first key of a queue's partition-name
// interning lock; the second is the queue id. pgque.intern_partitions takes
// it (transaction-scoped) only when a name is new.
const PartitionInternClassID int32 = ClassID + 3

// PushPartitionClassID is the first key of a (queue, partition) push lock;
// the second is the key pgque.push derives for the pair. push takes it
// (transaction-scoped) per partition that has items to write.
const PushPartitionClassID int32 = ClassID + 4

// GroupSeedClassID is the first key of a consumer group's cursor-seeding
// lock; the second is a hash of the queue and group. pgque.group_seed takes
// it (transaction-scoped) when a cursor is created.
const GroupSeedClassID int32 = ClassID + 5

// SubscriptionReaderClassID is the first key of a subscription's reader
// lock; the second is the subscription id. receive() takes it shared and
// session-scoped for the delivery it returns, ack() in that session gives it
// back, and the backend's exit drops it: pgque.delivery_reader reads
// pg_locks to tell whether the delivery's reader session is still alive.
const SubscriptionReaderClassID int32 = ClassID + 16
