-- bench/plancache/pop_ack.sql: PostgreSQL time per pgque.pop_list and
-- pgque.group_ack call, in one session (what a broker connection sees once
-- its plans are cached). Run against a database holding the engine and
-- nothing else:  psql -v ON_ERROR_STOP=1 -d <db> -f bench/plancache/pop_ack.sql
-- Data: queue plancache_bench, 100 partitions p1..p100, 20 events each,
-- ticked. Measures, 200 calls each (the first call of each kind is not counted
-- (first-call planning) and reported apart):
--   empty_pop: pop_list over 8 partitions with nothing pending (e1..e8,
--     interned, never pushed to);
--   pop: pop_list of 1 message from one pending partition (leases it);
--   ack: group_ack of that message (releases the lease).
\set QUIET on
\pset footer off
SELECT count(*) AS pushed FROM pgque.push(array_fill('plancache_bench'::text, ARRAY[2000]),
       ARRAY(SELECT 'p' || (1 + g % 100) FROM generate_series(0, 1999) g),
       array_fill('{"x":1}'::jsonb, ARRAY[2000]), NULL);
SELECT count(*) AS interned FROM pgque.push(array_fill('plancache_bench'::text, ARRAY[8]),
       ARRAY(SELECT 'e' || g FROM generate_series(1, 8) g), array_fill('{"x":1}'::jsonb, ARRAY[8]), NULL);
SELECT pgque.broker_tick('plancache_bench') IS NOT NULL AS ticked;
-- drain e1..e8 (auto-ack) so they have nothing pending
SELECT count(*) FILTER (WHERE message_id IS NOT NULL) AS drained
  FROM pgque.pop_list('plancache_bench', 'g', ARRAY(SELECT part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue
                                                     WHERE q.queue_name = 'plancache_bench' AND p.part_name ~ '^e\d$'), 100, 8, NULL, true, 'all');
CREATE TEMP TABLE bench_result (what text, calls int, first_ms numeric, ms_per_call numeric);
DO $bench$
DECLARE
    v_q      int := (SELECT queue_id FROM pgque.queue WHERE queue_name = 'plancache_bench');
    v_empty  int[] := ARRAY(SELECT part_id FROM pgque.partition WHERE part_queue = v_q AND part_name ~ '^e\d$' ORDER BY part_id);
    v_full   int[] := ARRAY(SELECT part_id FROM pgque.partition WHERE part_queue = v_q AND part_name ~ '^p\d+$' ORDER BY part_id);
    v_n      int := 200;
    v_t      timestamptz;
    v_first  numeric;
    v_pop    interval := interval '0';
    v_ack    interval := interval '0';
    v_pfirst numeric;
    v_afirst numeric;
    r        record;
    a        record;
BEGIN
    v_t := clock_timestamp();
    PERFORM * FROM pgque.pop_list('plancache_bench', 'g', v_empty, 10, 8);
    v_first := extract(epoch FROM clock_timestamp() - v_t) * 1000;
    v_t := clock_timestamp();
    FOR i IN 1 .. v_n LOOP
        PERFORM * FROM pgque.pop_list('plancache_bench', 'g', v_empty, 10, 8);
    END LOOP;
    INSERT INTO bench_result VALUES ('empty_pop (8 candidates)', v_n, round(v_first, 2),
                                     round(extract(epoch FROM clock_timestamp() - v_t) * 1000 / v_n, 3));
    FOR i IN 0 .. v_n LOOP
        v_t := clock_timestamp();
        SELECT * INTO r FROM pgque.pop_list('plancache_bench', 'g', ARRAY[v_full[1 + i % 100]], 1, 1) WHERE message_id IS NOT NULL;
        IF i = 0 THEN v_pfirst := extract(epoch FROM clock_timestamp() - v_t) * 1000; ELSE v_pop := v_pop + (clock_timestamp() - v_t); END IF;
        IF r.message_id IS NULL THEN
            RAISE EXCEPTION 'bench: no message popped at call %', i;
        END IF;
        v_t := clock_timestamp();
        SELECT * INTO a FROM pgque.group_ack('g', ARRAY[r.transaction_id], ARRAY[r.partition_uuid], NULL, ARRAY[r.lease_id], NULL);
        IF i = 0 THEN v_afirst := extract(epoch FROM clock_timestamp() - v_t) * 1000; ELSE v_ack := v_ack + (clock_timestamp() - v_t); END IF;
        IF NOT a.success THEN
            RAISE EXCEPTION 'bench: ack failed at call %: %', i, a.error;
        END IF;
    END LOOP;
    INSERT INTO bench_result VALUES ('pop (1 message, 1 partition)', v_n, round(v_pfirst, 2), round(extract(epoch FROM v_pop) * 1000 / v_n, 3));
    INSERT INTO bench_result VALUES ('ack (1 message)', v_n, round(v_afirst, 2), round(extract(epoch FROM v_ack) * 1000 / v_n, 3));
END;
$bench$;
\set QUIET off
SELECT * FROM bench_result;
