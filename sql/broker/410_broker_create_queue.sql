-- pgque.broker_create_queue(i_queue_name): create a queue: its row, event
-- sequence, tick sequence, 3 insert-only event tables (autovacuum off;
-- indexes on ev_txid and (ev_partition, ev_txid, ev_id): the broker's
-- per-partition reads in (ev_txid, ev_id) order stop after LIMIT rows; and
-- on ev_id: group_ack finds an acked message by the event id its message
-- id carries, group_ack_below), the
-- Default partition and a first tick, and the queue's generated read
-- functions (group_plans: the broker's statements over its event tables,
-- planned once per session).
-- Names are data: any text of 1..322 bytes without control characters (a
-- broker tenant, U+241F and a 255-byte client name); nothing is derived
-- from the name but the NOTIFY channel (pgque.queue_channel): tables,
-- sequences, generated functions and lock keys use the queue id.
-- Returns: 1 created, 0 already existed. Locks: queue row (insert).
-- Writes: queue, partition, tick; creates objects. Called by:
-- pgque.create_queue (the PgQue API: names up to 57 bytes), pgque.push and
-- pgque.configure_queue (the broker's names).
CREATE OR REPLACE FUNCTION pgque.broker_create_queue(i_queue_name text)
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
    IF i_queue_name IS NULL OR i_queue_name = '' THEN
        RAISE EXCEPTION 'pgque: queue name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(i_queue_name) > 322 THEN
        RAISE EXCEPTION 'pgque: queue name "%..." is % bytes; the limit is 322', left(i_queue_name, 32),
            octet_length(i_queue_name) USING ERRCODE = 'invalid_parameter_value';
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
        EXECUTE format('CREATE INDEX %I ON %s (ev_id)', 'event_' || v_id || '_' || v_n || '_id_idx', v_tbl);
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

-- Upgrade: event tables of queues created before group_ack probed events by
-- ev_id get the (ev_id) index (idempotent; the tables are rotated, so they
-- hold at most the retained events).
DO $upgrade$
DECLARE
    v_tbl record;
BEGIN
    FOR v_tbl IN
        SELECT t.relname, replace(c.relname, '_part_idx', '_id_idx') AS idx
          FROM pg_catalog.pg_class c
          JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
          JOIN pg_catalog.pg_class t ON t.oid = i.indrelid
         WHERE c.relnamespace = 'pgque'::regnamespace AND c.relname ~ '^event_[0-9]+_[0-9]+_part_idx$'
    LOOP
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON pgque.%I (ev_id)', v_tbl.idx, v_tbl.relname);
    END LOOP;
END;
$upgrade$;
