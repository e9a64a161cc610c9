-- 040_lock_ids.sql: the one home of the engine's advisory-lock ids. Every
-- engine file takes and reads its locks through these functions, never a
-- number (sql/lock_ids_test.go fails on a literal elsewhere; internal/locks
-- holds the same ids for pgquectl and a test checks it against these). Two
-- files keep the numbers because they run without the engine: the install
-- lock in 000_preamble.sql (before anything exists) and in
-- uninstall/uninstall.sql (the schema may be gone); the test checks them too.
--
-- Each is plain SQL without a SET clause, returning a constant and
-- resolving no name: the planner inlines a call as its value (EXPLAIN shows
-- the number), so they cost nothing, and a SECURITY DEFINER caller calls
-- them schema-qualified (pgque.lock_id_...()). STABLE, not IMMUTABLE: the
-- planner would run an IMMUTABLE function once per planning to fold it (a
-- nested statement on every custom plan); a STABLE one it inlines without
-- running it. Locks: none.
-- Called by: every engine function that takes or reads an advisory lock;
-- pgquectl's tests.
--
--   pgque.lock_id_class() = 1885827445 (Go: locks.ClassID):
--     the first key of the engine's own two-key locks ('pgqu' as an int4);
--     its second keys are the lock_id_<name>() below that return small
--     numbers.
--   pgque.lock_id_install() = 1 (Go: locks.Install):
--     install / uninstall, transaction-scoped.
--   pgque.lock_id_ticker_leader() = 2 (Go: locks.TickerLeader):
--     the leading `pgquectl tick --run` daemon, session-scoped.
--   pgque.lock_id_metadata_rotation() = 4 (Go: locks.MetadataRotation):
--     one metadata rotation at a time (rotate_metadata, group_rotate),
--     transaction-scoped try-lock.
--   pgque.lock_id_ticker_loop() = 5 (Go: locks.TickerLoop):
--     a running ticker_loop(), session-scoped: the pg_cron loop is alive.
--   pgque.lock_id_ticking() = 6 (Go: locks.Ticking):
--     held shared by every ticker transaction, read from pg_locks by
--     tick_in_flight.
--   pgque.lock_id_queue_tick_class() = 1885827446 (Go: locks.QueueTickClassID):
--     first key of a queue's tick lock (second: queue_id).
--   pgque.lock_id_subscription_batch_class() = 1885827447 (Go: locks.SubscriptionBatchClassID):
--     first key of a subscription's batch lock (second: sub_id).
--   pgque.lock_id_partition_intern_class() = 1885827448 (Go: locks.PartitionInternClassID):
--     first key of a queue's partition-name interning lock (second:
--     queue_id).
--   pgque.lock_id_push_partition_class() = 1885827449 (Go: locks.PushPartitionClassID):
--     first key of a (queue, partition) push lock (second: its key).
--   pgque.lock_id_group_seed_class() = 1885827450 (Go: locks.GroupSeedClassID):
--     first key of a consumer group's cursor-seeding lock (second: hash of
--     queue and group).
--   pgque.lock_id_subscription_reader_class() = 1885827461 (Go: locks.SubscriptionReaderClassID):
--     first key of a subscription's reader lock (second: sub_id), shared and
--     session-scoped.
CREATE OR REPLACE FUNCTION pgque.lock_id_class()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 1885827445;
CREATE OR REPLACE FUNCTION pgque.lock_id_install()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 1;
CREATE OR REPLACE FUNCTION pgque.lock_id_ticker_leader()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 2;
CREATE OR REPLACE FUNCTION pgque.lock_id_metadata_rotation()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 4;
CREATE OR REPLACE FUNCTION pgque.lock_id_ticker_loop()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 5;
CREATE OR REPLACE FUNCTION pgque.lock_id_ticking()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 6;
CREATE OR REPLACE FUNCTION pgque.lock_id_queue_tick_class()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 1885827446;
CREATE OR REPLACE FUNCTION pgque.lock_id_subscription_batch_class()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 1885827447;
CREATE OR REPLACE FUNCTION pgque.lock_id_partition_intern_class()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 1885827448;
CREATE OR REPLACE FUNCTION pgque.lock_id_push_partition_class()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 1885827449;
CREATE OR REPLACE FUNCTION pgque.lock_id_group_seed_class()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 1885827450;
CREATE OR REPLACE FUNCTION pgque.lock_id_subscription_reader_class()
RETURNS pg_catalog.int4
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 1885827461;
