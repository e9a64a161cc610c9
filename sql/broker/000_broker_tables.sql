-- broker/000_broker_tables.sql: the tables of the partitioned log's readers (the
-- broker: partitions, consumer groups, dedup). Every statement is re-runnable.
-- The 98_* block installs after the engine's core and before sql/procedures.
--
-- Write patterns:
--   broker_group, group_subscription  administration / first contact only.
--   group_cursor_<g>   one row per (queue, group, partition), updated per pop
--                      and ack; three children rotated like subscription_<g>
--                      (live rows move to the next child, the old child is
--                      TRUNCATEd in a later call) so a held xmin leaves a
--                      bounded number of dead tuples.
--   dedup_<g>          insert-only, child by time slot (dedup_gen), a child
--                      is TRUNCATEd once its newest row is older than every
--                      queue's dedup window: never updated nor deleted.
--   group_dead_letter  DLQ moves, replay and purge (proportional to failures).

-- Consumer group names, interned (shared by all queues, like consumer).
-- The id also marks a replayed event as this group's only: ev_owner = -grp_id.
CREATE TABLE IF NOT EXISTS pgque.broker_group (
    grp_id   serial      PRIMARY KEY,
    grp_name text        NOT NULL UNIQUE,
    grp_created timestamptz NOT NULL DEFAULT now()
);

-- A group's subscription to a queue: decided at first contact, it seeds the
-- cursor of every partition the group reaches later.
--   gs_lo   snapshot a new partition cursor starts after;
--   gs_from events created before it are skipped (mode new / from timestamp).
CREATE TABLE IF NOT EXISTS pgque.group_subscription (
    gs_queue   int         NOT NULL REFERENCES pgque.queue (queue_id) ON DELETE CASCADE,
    gs_group   int         NOT NULL REFERENCES pgque.broker_group (grp_id) ON DELETE CASCADE,
    gs_mode    text        NOT NULL,
    gs_lo      pg_snapshot NOT NULL,
    gs_from    timestamptz,
    gs_created timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (gs_queue, gs_group)
);

-- Group cursors, one per (queue, group, partition). The open range is
-- (gc_lo, gc_hi]: events visible in gc_hi's snapshot and not in gc_lo's,
-- served in (ev_txid, ev_id) order; (gc_pos_txid, gc_pos) is the last done
-- event inside it (NULL: none). Snapshots are kept in the row, so a cursor
-- needs no tick row (tick rotation never strands it); gc_tick is the tick
-- id of gc_hi, for information.
-- Lease: gc_lease (id), gc_lease_until (expiry), (gc_end_txid,
-- gc_lease_end) the last event of the leased batch. gc_attempts: deliveries
-- of the batch after the position; gc_fail_ev / gc_fails: failed acks of the
-- first pending event (its ev_id).
CREATE SEQUENCE IF NOT EXISTS pgque.group_cursor_gen_seq MINVALUE 0 START 0;
CREATE TABLE IF NOT EXISTS pgque.group_cursor (
    gc_gen         smallint    NOT NULL,
    gc_queue       int         NOT NULL,
    gc_group       int         NOT NULL,
    gc_partition   int         NOT NULL,
    gc_tick        bigint,
    gc_lo          pg_snapshot NOT NULL,
    gc_hi          pg_snapshot NOT NULL,
    gc_pos_txid    xid8,
    gc_pos         bigint,
    gc_from        timestamptz,
    gc_lease       uuid,
    gc_lease_until timestamptz,
    gc_end_txid    xid8,
    gc_lease_end   bigint,
    gc_attempts    int         NOT NULL DEFAULT 0,
    gc_fail_ev     bigint,
    gc_fails       int         NOT NULL DEFAULT 0,
    gc_active      timestamptz NOT NULL DEFAULT now(),
    gc_moved_at    timestamptz NOT NULL DEFAULT now(),
    gc_created     timestamptz NOT NULL DEFAULT now()
) PARTITION BY LIST (gc_gen);
CREATE TABLE IF NOT EXISTS pgque.group_cursor_0 PARTITION OF pgque.group_cursor FOR VALUES IN (0) WITH (fillfactor = 50, autovacuum_enabled = off);
CREATE TABLE IF NOT EXISTS pgque.group_cursor_1 PARTITION OF pgque.group_cursor FOR VALUES IN (1) WITH (fillfactor = 50, autovacuum_enabled = off);
CREATE TABLE IF NOT EXISTS pgque.group_cursor_2 PARTITION OF pgque.group_cursor FOR VALUES IN (2) WITH (fillfactor = 50, autovacuum_enabled = off);
CREATE INDEX IF NOT EXISTS group_cursor_key_idx ON pgque.group_cursor (gc_queue, gc_group, gc_partition);

-- The acks a live lease has taken ahead of its cursor's position
-- (group_ack). The position only moves over a contiguous prefix of resolved
-- events, so an event acked out of order is remembered here until the
-- events before it are resolved:
--   gc_acked        the leased batch's events resolved after the position:
--                   (ev_id, ev_txid, pv_id: the event before it in the
--                   batch, retry: true for a failed / retry ack waiting for
--                   the events before it, false for completed /
--                   dead-lettered);
--   gc_acked_lease  the lease they were taken under: they count only while
--                   gc_lease is still that lease (a lease that ends
--                   otherwise - expiry and a new pop, seek - leaves them
--                   stale and ignored, so nothing else has to clear them).
-- Added after the table's first version: an existing install gets them.
DO $type$
BEGIN
    IF to_regtype('pgque.group_acked') IS NULL THEN
        CREATE TYPE pgque.group_acked AS (ev_id bigint, ev_txid xid8, pv_id bigint, retry boolean);
    END IF;
END;
$type$;
ALTER TABLE pgque.group_cursor ADD COLUMN IF NOT EXISTS gc_acked pgque.group_acked[],
                               ADD COLUMN IF NOT EXISTS gc_acked_lease uuid;

-- transactionId dedup: insert-only, three children by time slot.
CREATE TABLE IF NOT EXISTS pgque.dedup (
    dd_gen       smallint    NOT NULL,
    dd_queue     int         NOT NULL,
    dd_partition int         NOT NULL,
    dd_txn       text        NOT NULL,
    dd_msg       uuid        NOT NULL,
    dd_time      timestamptz NOT NULL DEFAULT now()
) PARTITION BY LIST (dd_gen);
CREATE TABLE IF NOT EXISTS pgque.dedup_0 PARTITION OF pgque.dedup FOR VALUES IN (0) WITH (autovacuum_enabled = off);
CREATE TABLE IF NOT EXISTS pgque.dedup_1 PARTITION OF pgque.dedup FOR VALUES IN (1) WITH (autovacuum_enabled = off);
CREATE TABLE IF NOT EXISTS pgque.dedup_2 PARTITION OF pgque.dedup FOR VALUES IN (2) WITH (autovacuum_enabled = off);
CREATE INDEX IF NOT EXISTS dedup_key_idx ON pgque.dedup (dd_queue, dd_partition, dd_txn);

-- Dead letters of consumer groups.
CREATE TABLE IF NOT EXISTS pgque.group_dead_letter (
    gdl_id        bigserial   PRIMARY KEY,
    gdl_queue     int         NOT NULL,
    gdl_group     int         NOT NULL,
    gdl_partition int         NOT NULL,
    gdl_msg       uuid        NOT NULL,
    gdl_txn       text        NOT NULL,
    gdl_ev_id     bigint      NOT NULL,
    gdl_created   timestamptz NOT NULL,
    gdl_data      text,
    gdl_error     text,
    gdl_retries   int         NOT NULL DEFAULT 0,
    gdl_failed_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (gdl_queue, gdl_group, gdl_ev_id)
);
CREATE INDEX IF NOT EXISTS group_dead_letter_queue_idx ON pgque.group_dead_letter (gdl_queue, gdl_group);
