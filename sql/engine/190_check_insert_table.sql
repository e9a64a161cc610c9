-- pgque.check_insert_table(i_queue_id, i_cur, i_ntables): for a producer
-- whose transaction snapshot is older than its statement (REPEATABLE READ,
-- SERIALIZABLE), make sure the event table it just inserted into is still
-- the queue's current one; raise SQLSTATE 40001 (serialization_failure:
-- roll back and retry) when a table switch committed after the snapshot.
--
-- Why: such a producer reads queue_cur_table through its old snapshot. If
-- maint_rotate_tables_step1 (and step 2) committed since, its row would land
-- in the previous table with a txid above queue_switch_step2, where
-- batch_event_rows never looks: the event would be lost silently. READ
-- COMMITTED producers never need this: they take their xid before reading
-- queue_cur_table with a fresh snapshot, so a switch they miss commits after
-- their xid exists and its step 2 txid is above theirs.
-- How, without a write: step 1 TRUNCATEs the table after i_cur before it
-- becomes current, which gives it a new relfilenode. pg_class read through
-- the transaction snapshot shows the old one; pg_relation_filenode() reads
-- the catalog cache, which the INSERT's table lock brought up to date. A
-- difference means a switch (of this queue) committed after the snapshot.
-- A switch after the insert's lock is harmless (the producer's xid already
-- exists, below that switch's step 2 txid). Other updates of the queue row
-- (ticks, configuration) do not trip it. Costs two catalog lookups, no WAL.
-- Returns: nothing. Locks: none. Reads: pg_class.
-- Called by: insert_event, send_batch, dlq_replay, group_dlq_replay, push, push_direct (non-READ COMMITTED only).
CREATE OR REPLACE FUNCTION pgque.check_insert_table(i_queue_id int, i_cur int, i_ntables int)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_next oid := pgque.event_table(i_queue_id, (i_cur + 1) % i_ntables)::regclass;
    v_seen oid;
BEGIN
    SELECT c.relfilenode INTO v_seen FROM pg_catalog.pg_class c WHERE c.oid = v_next;
    IF v_seen IS DISTINCT FROM pg_catalog.pg_relation_filenode(v_next) THEN
        RAISE EXCEPTION 'pgque: the event tables of queue % were switched after this transaction''s snapshot was taken; nothing was sent', i_queue_id
            USING ERRCODE = 'serialization_failure',
                  HINT = 'Roll back and retry the transaction (as for any serialization failure).';
    END IF;
END;
$$;
