-- pgque.message_delete(i_tenant, i_partition, i_txn): delete a message by
-- its Queen address (message_find: a queue the broker tenant i_tenant
-- owns): every event of the address not deleted yet gets a
-- message_tombstone row. No event row is updated or deleted; consumer
-- groups never receive the message again (group_range_sql skips it) -
-- except a batch already leased, whose consumer may still ack it. Classic
-- PgQ consumers still receive it (they read the event tables directly).
-- The event tables stay ACCESS SHARE locked until commit (message_find),
-- so a rotation cannot truncate the table between the read and the insert.
-- Returns: the events newly marked (0: not found, or deleted already).
-- Locks: the tombstone rows' keys. Writes: message_tombstone.
-- Called by: the broker (DELETE /api/v1/messages/:partitionId/:transactionId).
CREATE OR REPLACE FUNCTION pgque.message_delete(i_tenant text, i_partition uuid, i_txn text)
RETURNS int
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_n int;
BEGIN
    INSERT INTO pgque.message_tombstone (mt_queue, mt_ev_id, mt_table, mt_partition, mt_txid)
    SELECT f.queue_id, f.ev_id, f.ev_table, f.part_id, f.ev_txid
      FROM pgque.message_find(i_tenant, i_partition, i_txn) f
    ON CONFLICT (mt_queue, mt_ev_id) DO NOTHING;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
