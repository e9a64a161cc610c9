-- pgque.insert_event(queue_name, ev_type, ev_data[, ev_extra1, ev_extra2,
-- ev_extra3, ev_extra4]): the PgQ
-- primitive: insert one event into the queue's current event table.
-- Insert-only: reads the queue row without a lock, INSERTs one row.
-- The transaction's xid is taken before queue_cur_table is read, so a table
-- switch this statement does not see commits after the xid exists and its
-- step 2 txid is above ours (batch_event_rows then still reads the previous
-- table for us). A REPEATABLE READ / SERIALIZABLE producer reads the queue
-- row through an older snapshot; check_insert_table raises 40001 (retry)
-- when a switch committed after it, instead of losing the event. READ
-- COMMITTED producers pay nothing for that check.
-- Returns: the event id. Locks: none beyond the INSERT's own.
-- Writes: event_<q>_<cur>. Called by: send(), producers.
CREATE OR REPLACE FUNCTION pgque.insert_event(queue_name text, ev_type text, ev_data text,
                                              ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue_id int;
    v_cur      int;
    v_ntables  int;
    v_id       bigint;
BEGIN
    PERFORM pg_current_xact_id();  -- the xid first, then the queue row (see above)
    SELECT q.queue_id, q.queue_cur_table, q.queue_ntables INTO v_queue_id, v_cur, v_ntables
      FROM pgque.queue q WHERE q.queue_name = insert_event.queue_name;
    IF NOT FOUND THEN
        PERFORM pgque.find_queue(insert_event.queue_name, 'raise_exception');  -- raises (P0001, as PgQue)
    END IF;
    EXECUTE format('INSERT INTO %s (ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) '
                   'VALUES ($1, $2, $3, $4, $5, $6) RETURNING ev_id', pgque.event_table(v_queue_id, v_cur))
       INTO v_id
      USING ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM pgque.check_insert_table(v_queue_id, v_cur, v_ntables);
    END IF;
    RETURN v_id;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.insert_event(queue_name text, ev_type text, ev_data text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT pgque.insert_event(queue_name, ev_type, ev_data, NULL::text, NULL::text, NULL::text, NULL::text));
END;
$$;
