-- pgque.group_plans(i_queue_id, i_create): keep a queue's generated
-- functions (reads, and push's INSERT) in step with the engine. With
-- i_create, (re)creates, for every
-- statement kind of pgque.group_plan_sql and every event table c of the
-- queue, pgque.<kind>_q<queue id>_t<c>: a PL/pgSQL function whose body is
-- that statement over the tables c (current) and c - 1 (previous), static,
-- so each session plans it once; SET plan_cache_mode = force_generic_plan
-- (the generic plan is reused from the second call on: no planning per
-- call), SET jit = off (a generic plan's cost estimate grows with the
-- backlog; past jit_above_cost every call compiled its expressions anew:
-- 285 ms of a 440 ms pop over 200,000 queued events), SET
-- enable_bitmapscan = off and enable_seqscan = off (every access here is
-- by an index, and a range scan must walk (ev_partition, ev_txid, ev_id)
-- in order and stop at its LIMIT; with row estimates of a few rows the
-- planner preferred bitmap or sequential scans, which read a whole range
-- or table), SET enable_sort = off and enable_incremental_sort = off (a
-- range read states its partition by equality and its position as a
-- (ev_txid, ev_id) row comparison, so that B-tree starts at the position;
-- the (ev_txid) index can then serve the same bounds, and once the table
-- was analyzed its correlation made it look cheaper: it reads every
-- partition's events of the range and sorts them, which these settings
-- price out - TestReseedReadsBoundedAfterAnalyze; statements that need a
-- sort whatever the plan, e.g. for window functions, still get one), SET
-- search_path = pg_catalog, pgque, pg_temp,
-- #variable_conflict
-- use_column. They are not SECURITY DEFINER and nobody but the owner (the
-- engine's owner: this runs as it) may execute them (REVOKE ALL FROM
-- PUBLIC): only the SECURITY DEFINER entry points (push, pop_list, group_ack,
-- group_pending, group_advance_idle) call them. Except two kinds the broker
-- calls itself: push_direct (EXECUTE granted to pgque_writer) and
-- ack_direct (to pgque_reader), SECURITY DEFINER (their fn_volatility)
-- with search_path their only SET (as every SECURITY DEFINER function:
-- ack_direct's reads run in the group_ack_fast function it calls), which
-- check their arguments against the queue, partition and cursor rows and
-- change nothing when those do not match. A generated function names
-- only the current and the previous event table: a plan locks every table
-- it names when it runs, and the rotation must truncate the oldest one
-- without waiting for pops. The number of event tables (queue_ntables) is
-- fixed at create_queue, so the set never needs to change afterwards but
-- for an engine upgrade (the install re-runs this for every queue).
-- Without i_create (or for an unknown queue) only drops. Either way every
-- other pgque function named <kind>_q<queue id>_t<n> is dropped (kinds or
-- tables no longer generated, and older argument lists of a kind: a
-- changed signature creates an overload beside the old one).
-- Returns: the number of functions created. Locks: none besides the
-- catalog's (CREATE / DROP FUNCTION). Writes: pg_proc (creates, replaces,
-- drops functions). Called by: broker_create_queue, drop_queue, the install (below:
-- every existing queue).
CREATE OR REPLACE FUNCTION pgque.group_plans(i_queue_id int, i_create boolean DEFAULT true)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_made  text[] := '{}';
    v_oids  oid[] := '{}';
    v_c     int;
    v_name  text;
    v_sql   text;
    r       record;
BEGIN
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    IF i_create AND FOUND THEN
        FOR v_c IN 0 .. v_queue.queue_ntables - 1 LOOP
            FOR r IN SELECT * FROM pgque.group_plan_sql(i_queue_id,
                                                        ARRAY[v_c, (v_c + v_queue.queue_ntables - 1) % v_queue.queue_ntables]) LOOP
                v_name := format('%s_q%s_t%s', r.fn_kind, i_queue_id, v_c);
                v_sql := format('CREATE OR REPLACE FUNCTION pgque.%I(%s) RETURNS %s LANGUAGE plpgsql %s %s'
                                'SET search_path = pg_catalog, pgque, pg_temp '
                                'AS %L',
                                v_name, r.fn_args, r.fn_result, r.fn_volatility,
                                CASE WHEN r.fn_volatility NOT LIKE '%SECURITY DEFINER%' THEN
                                    'SET jit = off SET enable_bitmapscan = off SET enable_seqscan = off SET enable_sort = off SET enable_incremental_sort = off SET plan_cache_mode = force_generic_plan '
                                ELSE '' END,
                                E'#variable_conflict use_column\n' || r.fn_body);
                BEGIN
                    EXECUTE v_sql;
                EXCEPTION WHEN invalid_function_definition THEN
                    -- an older engine's version with another result type
                    EXECUTE format('DROP FUNCTION pgque.%I(%s)', v_name, r.fn_args);
                    EXECUTE v_sql;
                END;
                EXECUTE format('REVOKE ALL ON FUNCTION pgque.%I(%s) FROM PUBLIC', v_name, r.fn_args);
                -- the two the broker calls itself (SECURITY DEFINER)
                IF r.fn_kind IN ('push_direct', 'ack_direct') THEN
                    EXECUTE format('GRANT EXECUTE ON FUNCTION pgque.%I(%s) TO %I', v_name, r.fn_args,
                                   CASE r.fn_kind WHEN 'push_direct' THEN 'pgque_writer' ELSE 'pgque_reader' END);
                END IF;
                v_made := v_made || v_name;
                v_oids := v_oids || to_regprocedure(format('pgque.%I(%s)', v_name, r.fn_args))::oid;
            END LOOP;
        END LOOP;
    END IF;
    FOR r IN SELECT p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid) AS args FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'pgque'::regnamespace
                AND p.proname ~ ('^[a-z_]+_q' || i_queue_id || '_t[0-9]+$') AND NOT p.oid = ANY (v_oids) LOOP
        EXECUTE format('DROP FUNCTION pgque.%I(%s)', r.proname, r.args);
    END LOOP;
    RETURN cardinality(v_made);
END;
$$;
-- Install / upgrade: generate (or regenerate: the statements may have
-- changed) every existing queue's functions; idempotent.
DO $plans$
BEGIN
    PERFORM pgque.group_plans(q.queue_id, true) FROM pgque.queue q;
END;
$plans$;
