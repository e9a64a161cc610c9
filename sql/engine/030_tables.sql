-- 030_tables.sql: the engine's tables. Every statement is re-runnable.
--
-- Write patterns (why the tables look the way they do):
--   event_<q>_<n>  insert-only, rotated by TRUNCATE: a held xmin cannot bloat them.
--   tick_<g>       insert-only, three children by time slot, a child is
--                  TRUNCATEd when no reader needs any of its ticks.
--   subscription_<g> cursor rows updated once per acknowledged delivery
--                  (receive() writes its delivery to the unlogged sequences
--                  delivery_<sub_id>_*, see 380_delivery_seqs.sql); three
--                  children, live rows are moved to the next child and the
--                  old one TRUNCATEd in a later transaction, so dead tuples
--                  stay bounded.
--   queue, consumer, settings, partition: changed by administration only.

-- Engine versions installed here; the newest row is the installed engine.
CREATE TABLE IF NOT EXISTS pgque.engine_version (
    version      text        NOT NULL,
    version_num  int         NOT NULL PRIMARY KEY,
    installed_at timestamptz NOT NULL DEFAULT now()
);
-- The SHA-256 of the install script that made this engine version (its last
-- statement records it): pgquectl install runs the script again when its
-- own differs, e.g. a newer build of the same version.
ALTER TABLE pgque.engine_version ADD COLUMN IF NOT EXISTS script_sha256 text;

-- Installation-wide settings (pgque.get_setting / pgque.set_setting).
CREATE TABLE IF NOT EXISTS pgque.settings (
    name        text PRIMARY KEY,
    value       text,
    description text NOT NULL
);
-- Its rows, with their defaults and ranges, come from pgque.setting_spec()
-- (050_setting_spec.sql).

-- Queues.
CREATE TABLE IF NOT EXISTS pgque.queue (
    queue_id                 serial      PRIMARY KEY,
    queue_name               text        NOT NULL UNIQUE,
    queue_ntables            int         NOT NULL DEFAULT 3,
    queue_cur_table          int         NOT NULL DEFAULT 0,
    queue_rotation_period    interval    NOT NULL DEFAULT '2 hours',
    queue_switch_step1       xid8        NOT NULL DEFAULT pg_current_xact_id(),
    queue_switch_step2       xid8                 DEFAULT pg_current_xact_id(),
    queue_switch_time        timestamptz NOT NULL DEFAULT now(),
    queue_external_ticker    boolean     NOT NULL DEFAULT false,
    queue_ticker_paused      boolean     NOT NULL DEFAULT false,
    queue_ticker_max_count   int         NOT NULL DEFAULT 500,
    queue_ticker_max_lag     interval    NOT NULL DEFAULT '3 seconds',
    queue_ticker_idle_period interval    NOT NULL DEFAULT '1 minute',
    queue_tick_period_ms     int,
    queue_max_retries        int,
    queue_force_tick         boolean     NOT NULL DEFAULT false,
    queue_options            jsonb       NOT NULL DEFAULT '{}',
    queue_event_seq          regclass,
    queue_tick_seq           regclass,
    queue_created            timestamptz NOT NULL DEFAULT now(),
    -- 322 = a broker tenant (64) + U+241F (3) + a client name (255); the
    -- PgQue API (create_queue) keeps its own 57-byte limit.
    CONSTRAINT queue_name_bytes CHECK (octet_length(queue_name) BETWEEN 1 AND 322)
);
-- Upgrade from the 57-byte limit (constraint queue_name_length): only when
-- it is there, so a re-run takes no lock on pgque.queue.
DO $queue_name$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_constraint
                WHERE conrelid OPERATOR(pg_catalog.=) 'pgque.queue'::pg_catalog.regclass
                  AND conname OPERATOR(pg_catalog.=) 'queue_name_length') THEN
        ALTER TABLE pgque.queue DROP CONSTRAINT queue_name_length,
            ADD CONSTRAINT queue_name_bytes CHECK (pg_catalog.octet_length(queue_name) BETWEEN 1 AND 322);
    END IF;
END
$queue_name$;

-- Consumer names (shared by all queues).
CREATE TABLE IF NOT EXISTS pgque.consumer (
    co_id   serial PRIMARY KEY,
    co_name text   NOT NULL UNIQUE
);

-- Partitions of a queue: named FIFO lanes; 0 is "Default".
CREATE TABLE IF NOT EXISTS pgque.partition (
    part_queue int  NOT NULL REFERENCES pgque.queue (queue_id) ON DELETE CASCADE,
    part_id    int  NOT NULL,
    part_name  text NOT NULL,
    part_uuid  uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    PRIMARY KEY (part_queue, part_id),
    UNIQUE (part_queue, part_name)
);

-- Ticks: a snapshot per queue per tick; insert-only, children by time slot.
CREATE TABLE IF NOT EXISTS pgque.tick (
    tick_gen       smallint    NOT NULL,
    tick_queue     int         NOT NULL,
    tick_id        bigint      NOT NULL,
    tick_time      timestamptz NOT NULL DEFAULT now(),
    tick_snapshot  pg_snapshot NOT NULL DEFAULT pg_current_snapshot(),
    tick_event_seq bigint      NOT NULL,
    -- event ids allocated since the previous tick (an upper bound of its events)
    tick_new_ids   bigint      NOT NULL DEFAULT 0,
    -- producers in flight at the tick (see tick_queue): the queue re-ticks
    -- once one of these transactions has committed; tick_wait_probe: some
    -- could not be named by xid, re-check by an index probe (due_queues)
    tick_wait      xid8[],
    tick_wait_probe boolean    NOT NULL DEFAULT false
) PARTITION BY LIST (tick_gen);
ALTER TABLE pgque.tick ADD COLUMN IF NOT EXISTS tick_wait xid8[];
ALTER TABLE pgque.tick ADD COLUMN IF NOT EXISTS tick_wait_probe boolean NOT NULL DEFAULT false;
CREATE TABLE IF NOT EXISTS pgque.tick_0 PARTITION OF pgque.tick FOR VALUES IN (0) WITH (autovacuum_enabled = off);
CREATE TABLE IF NOT EXISTS pgque.tick_1 PARTITION OF pgque.tick FOR VALUES IN (1) WITH (autovacuum_enabled = off);
CREATE TABLE IF NOT EXISTS pgque.tick_2 PARTITION OF pgque.tick FOR VALUES IN (2) WITH (autovacuum_enabled = off);
CREATE INDEX IF NOT EXISTS tick_queue_id_idx ON pgque.tick (tick_queue, tick_id);

-- Classic subscriptions (cursor rows). sub_gen says which child holds the row.
CREATE SEQUENCE IF NOT EXISTS pgque.subscription_id_seq AS int;
CREATE SEQUENCE IF NOT EXISTS pgque.subscription_gen_seq MINVALUE 0 START 0;
CREATE SEQUENCE IF NOT EXISTS pgque.batch_id_seq;
CREATE TABLE IF NOT EXISTS pgque.subscription (
    sub_gen        smallint    NOT NULL,
    sub_id         int         NOT NULL,
    sub_queue      int         NOT NULL,
    sub_consumer   int         NOT NULL,
    sub_last_tick  bigint      NOT NULL,
    sub_batch      bigint,
    sub_next_tick  bigint,
    -- inside an open batch: events up to sub_batch_pos (by ev_id) are done;
    -- sub_batch_sent: last ev_id the latest receive() returned, NULL when it
    -- returned the rest of the batch (then ack finishes the batch).
    sub_batch_pos  bigint,
    sub_batch_sent bigint,
    sub_batch_recv boolean     NOT NULL DEFAULT false,
    sub_active     timestamptz NOT NULL DEFAULT now(),
    sub_moved_at   timestamptz NOT NULL DEFAULT now(),
    sub_registered timestamptz NOT NULL DEFAULT now()
) PARTITION BY LIST (sub_gen);
CREATE TABLE IF NOT EXISTS pgque.subscription_0 PARTITION OF pgque.subscription FOR VALUES IN (0) WITH (fillfactor = 50, autovacuum_enabled = off);
CREATE TABLE IF NOT EXISTS pgque.subscription_1 PARTITION OF pgque.subscription FOR VALUES IN (1) WITH (fillfactor = 50, autovacuum_enabled = off);
CREATE TABLE IF NOT EXISTS pgque.subscription_2 PARTITION OF pgque.subscription FOR VALUES IN (2) WITH (fillfactor = 50, autovacuum_enabled = off);
CREATE INDEX IF NOT EXISTS subscription_queue_consumer_idx ON pgque.subscription (sub_queue, sub_consumer);

-- Template of the per-queue event tables (never holds rows itself).
CREATE TABLE IF NOT EXISTS pgque.event_template (
    ev_id        bigint      NOT NULL,
    ev_time      timestamptz NOT NULL DEFAULT now(),
    ev_txid      xid8        NOT NULL DEFAULT pg_current_xact_id(),
    ev_owner     int,
    ev_retry     int,
    ev_type      text,
    ev_data      text,
    ev_extra1    text,
    ev_extra2    text,
    ev_extra3    text,
    ev_extra4    text,
    ev_partition int         NOT NULL DEFAULT 0
);

-- Events waiting for their retry time (nack / event_retry).
CREATE TABLE IF NOT EXISTS pgque.retry_queue (
    ev_retry_after timestamptz NOT NULL,
    ev_queue       int         NOT NULL,
    LIKE pgque.event_template INCLUDING DEFAULTS,
    PRIMARY KEY (ev_owner, ev_id)
);
CREATE INDEX IF NOT EXISTS retry_queue_after_idx ON pgque.retry_queue (ev_retry_after);

-- Dead letters: one row per (queue, consumer, event).
CREATE TABLE IF NOT EXISTS pgque.dead_letter (
    dl_id          bigserial   PRIMARY KEY,
    dl_queue_id    int         NOT NULL,
    dl_consumer_id int         NOT NULL,
    dl_time        timestamptz NOT NULL DEFAULT now(),
    dl_reason      text,
    LIKE pgque.event_template,
    UNIQUE (dl_queue_id, dl_consumer_id, ev_id)
);
