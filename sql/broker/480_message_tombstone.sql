-- broker/480_message_tombstone.sql: deleted messages (DELETE /api/v1/messages).
-- Event rows are insert-only and rotated by TRUNCATE: a delete never
-- updates nor deletes one. It records the event here instead, and every
-- consumer-group read of a range skips it (pgque.group_range_sql), so a
-- deleted message is never delivered to a group afterwards. Classic PgQ
-- consumers (receive / get_batch_events) read the event tables directly and
-- still see it.
--
-- Write pattern: INSERT per delete (admin-rate); a queue's rows of event
-- table n are DELETEd when that table is truncated by the rotation
-- (maint_rotate_tables_step1, same transaction), and go with the queue
-- (ON DELETE CASCADE). While a queue has no row here, the range reads pay
-- one index probe per statement and nothing per event (group_range_sql).
--   mt_queue, mt_ev_id  the event (ev_id is unique per queue);
--   mt_table            the event table holding it (rotation drops by it);
--   mt_partition, mt_txid  the rest of the event's index key.
CREATE TABLE IF NOT EXISTS pgque.message_tombstone (
    mt_queue     int         NOT NULL REFERENCES pgque.queue (queue_id) ON DELETE CASCADE,
    mt_ev_id     bigint      NOT NULL,
    mt_table     int         NOT NULL,
    mt_partition int         NOT NULL,
    mt_txid      xid8        NOT NULL,
    mt_deleted   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (mt_queue, mt_ev_id)
);
CREATE INDEX IF NOT EXISTS message_tombstone_table_idx ON pgque.message_tombstone (mt_queue, mt_table);
