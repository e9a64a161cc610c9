-- pgque.create_queue(i_queue_name): create a queue: its row, event sequence,
-- tick sequence, 3 insert-only event tables (autovacuum off; indexes on
-- ev_txid and (ev_partition, ev_txid, ev_id): the broker's per-partition
-- reads in (ev_txid, ev_id) order stop after LIMIT rows), the Default
-- partition and a first tick, and the queue's generated read functions
-- (group_plans: the broker's statements over its event tables, planned once
-- per session).
-- Names are data: any text of 1..57 bytes without control characters (the
-- NOTIFY channel pgque_<name> must fit 63 bytes); tables are named by id.
-- Errors: NULL or too long: P0001 (as PgQue); empty, control characters:
-- invalid_parameter_value.
-- Returns: 1 created, 0 already existed. Locks: queue row (insert).
-- Writes: queue, partition, tick; creates objects. Called by: admins, broker.
CREATE OR REPLACE FUNCTION pgque.create_queue(i_queue_name text)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_id    int;
    v_n     int;
    v_tbl   text;
    v_seq   text;
    v_tseq  text;
BEGIN
    -- NULL and too long raise P0001 as PgQue does (its clients catch
    -- raise_exception); the refusals PgQue does not have keep 22023.
    IF i_queue_name IS NULL THEN
        RAISE EXCEPTION 'pgque: queue name must not be NULL' USING ERRCODE = 'raise_exception';
    END IF;
    IF i_queue_name = '' THEN
        RAISE EXCEPTION 'pgque: queue name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(i_queue_name) > 57 THEN
        RAISE EXCEPTION 'pgque: queue name "%" is % bytes; the limit is 57 (its NOTIFY channel pgque_<name> must fit 63 bytes)',
            i_queue_name, octet_length(i_queue_name) USING ERRCODE = 'raise_exception';
    END IF;
    IF i_queue_name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'pgque: queue name must not contain control characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    INSERT INTO pgque.queue (queue_name) VALUES (i_queue_name)
    ON CONFLICT (queue_name) DO NOTHING
    RETURNING queue_id INTO v_id;
    IF v_id IS NULL THEN
        RETURN 0;
    END IF;

    v_seq := format('pgque.%I', 'event_' || v_id || '_id_seq');
    v_tseq := format('pgque.%I', 'event_' || v_id || '_tick_seq');
    EXECUTE format('CREATE SEQUENCE %s', v_seq);
    EXECUTE format('CREATE SEQUENCE %s', v_tseq);
    FOR v_n IN 0 .. 2 LOOP
        v_tbl := pgque.event_table(v_id, v_n);
        EXECUTE format('CREATE TABLE %s (LIKE pgque.event_template INCLUDING DEFAULTS) '
                       'WITH (autovacuum_enabled = off, toast.autovacuum_enabled = off)', v_tbl);
        EXECUTE format('ALTER TABLE %s ALTER COLUMN ev_id SET DEFAULT nextval(%L::regclass)', v_tbl, v_seq);
        EXECUTE format('CREATE INDEX %I ON %s (ev_txid)', 'event_' || v_id || '_' || v_n || '_txid_idx', v_tbl);
        EXECUTE format('CREATE INDEX %I ON %s (ev_partition, ev_txid, ev_id)', 'event_' || v_id || '_' || v_n || '_part_idx', v_tbl);
    END LOOP;
    UPDATE pgque.queue SET queue_event_seq = v_seq::regclass, queue_tick_seq = v_tseq::regclass
     WHERE queue_id = v_id;
    INSERT INTO pgque.partition (part_queue, part_id, part_name) VALUES (v_id, 0, 'Default');
    INSERT INTO pgque.tick (tick_gen, tick_queue, tick_id, tick_snapshot, tick_event_seq)
    VALUES (pgque.tick_gen(now()), v_id, nextval(v_tseq::regclass), pgque.tick_snapshot(), 0);
    PERFORM pgque.group_plans(v_id, true);
    RETURN 1;
END;
$$;
