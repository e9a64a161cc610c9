-- pgque.rotate_family(i_family, i_rows_per_page, i_xid_budget): one
-- rotation step of a
-- rotated metadata family - a table LIST-partitioned into three children
-- <family>_0..2 by a generation column, whose rows are updated in place
-- (pgque.subscription: sub_*, classic consumers; pgque.group_cursor: gc_*,
-- the broker's consumer groups). The current child is <family>_gen() (the
-- generation sequence <family>_gen_seq mod 3).
-- When the current child holds garbage - it was updated since its rows
-- moved in (<p>_active > <p>_moved_at) and has grown past the pages its
-- live rows need (i_rows_per_page a page), which happens when a held xmin
-- stops HOT pruning - and either meta_rotation_ms() has passed, it has
-- grown by meta_rotation_max_pages, or i_xid_budget transaction ids were
-- assigned since its rows moved in (the update volume counted without writing:
-- pg_snapshot_xmax against this session's pgque.rotation_xid_<family>),
-- its rows move to the next child, which becomes current, and the old
-- child is TRUNCATEd in the same transaction (its garbage is gone at once;
-- no old child waits for a later call). A non-current child that still
-- has pages (rows stranded there by a writer racing a rotation) gets its
-- rows moved to the current child and is TRUNCATEd too. Every child worked
-- on is locked first, in partition order (0, 1, 2: the order in which a
-- statement on the parent locks them).
-- It does not bound lock waits nor catch lock errors: the caller
-- (rotate_metadata, group_rotate) sets lock_timeout and runs it in a
-- subtransaction, so a timeout releases every lock it took at once.
-- i_family: 'subscription' or 'group_cursor' (anything else raises
-- invalid_parameter_value).
-- Returns: children moved from and truncated. Locks: ACCESS EXCLUSIVE on
-- the children worked on. Writes: the family's table, its sequence.
-- Called by: rotate_metadata (subscription), group_rotate (group_cursor).
CREATE OR REPLACE FUNCTION pgque.rotate_family(i_family text, i_rows_per_page int, i_xid_budget int)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_p          text;
    v_cur        smallint;
    v_tbl        text;
    v_live       bigint;
    v_oldest     timestamptz;
    v_dirty      boolean;
    v_pages      bigint;
    v_live_pages int;
    v_xmax       bigint;
    v_mark       text[];
    v_guc        text;
    v_rotate     boolean;
    v_gens       smallint[];
    v_new        smallint;
    v_x          smallint;
    v_done       int := 0;
BEGIN
    CASE i_family
        WHEN 'subscription' THEN v_p := 'sub'; v_cur := pgque.subscription_gen();
        WHEN 'group_cursor' THEN v_p := 'gc';  v_cur := pgque.group_cursor_gen();
        ELSE
            RAISE EXCEPTION 'pgque: % is not a rotated metadata family (subscription, group_cursor)', coalesce(i_family, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
    END CASE;
    v_guc := 'pgque.rotation_xid_' || i_family;
    v_tbl := format('pgque.%I', i_family || '_' || v_cur);
    EXECUTE format('SELECT count(*), min(%1$I), coalesce(bool_or(%2$I > %1$I), false) FROM %3$s',
                   v_p || '_moved_at', v_p || '_active', v_tbl)
       INTO v_live, v_oldest, v_dirty;
    -- A child no bigger than its live rows need has no garbage worth
    -- moving them for (without a held xmin, HOT pruning keeps it that
    -- size), so idle rows cost no WAL.
    v_live_pages := ceil(v_live / i_rows_per_page::numeric)::int;
    v_pages := pg_relation_size(v_tbl::regclass) / current_setting('block_size')::bigint;
    -- Update volume since the rows moved in, counted cheaply: transaction
    -- ids assigned since then (each consumer write is one; other writers
    -- make it an over-estimate), remembered per session with the
    -- generation it belongs to.
    v_xmax := pg_snapshot_xmax(pg_current_snapshot())::text::bigint;
    v_mark := string_to_array(current_setting(v_guc, true), ':');
    IF cardinality(v_mark) IS DISTINCT FROM 2 OR v_mark[1] <> v_cur::text THEN
        v_mark := ARRAY[v_cur::text, v_xmax::text];
        PERFORM set_config(v_guc, array_to_string(v_mark, ':'), false);
    END IF;
    v_rotate := v_dirty
        AND v_pages > v_live_pages + 1
        AND (v_oldest <= now() - make_interval(secs => pgque.meta_rotation_ms() / 1000.0)
             OR v_pages >= coalesce(pgque.get_setting('meta_rotation_max_pages')::int, 4) + v_live_pages
             OR v_xmax - v_mark[2]::bigint >= i_xid_budget);
    -- Only time holds the rotation back: tell rotate_metadata's idle path
    -- when it falls due (pgque.rotation_until, epoch seconds, the earliest
    -- of the transaction's).
    IF v_dirty AND v_pages > v_live_pages + 1 AND NOT v_rotate THEN
        PERFORM pgque.rotation_due_at(v_oldest + make_interval(secs => pgque.meta_rotation_ms() / 1000.0));
    END IF;
    SELECT coalesce(array_agg(g ORDER BY g), '{}')
      INTO v_gens
      FROM generate_series(0, 2) g
     WHERE (g = v_cur AND v_rotate)
        OR (g <> v_cur AND pg_relation_size(format('pgque.%I', i_family || '_' || g)::regclass) > 0);
    IF cardinality(v_gens) = 0 THEN
        RETURN 0;
    END IF;
    FOREACH v_x IN ARRAY v_gens LOOP
        EXECUTE format('LOCK TABLE pgque.%I IN ACCESS EXCLUSIVE MODE', i_family || '_' || v_x);
    END LOOP;
    v_new := v_cur;
    IF v_rotate THEN
        v_new := (nextval(format('pgque.%I', i_family || '_gen_seq')::regclass) % 3)::smallint;
        PERFORM set_config(v_guc, v_new || ':' || v_xmax, false);
    END IF;
    FOREACH v_x IN ARRAY v_gens LOOP
        CONTINUE WHEN v_x = v_new;
        EXECUTE format('UPDATE pgque.%1$I SET %2$I = $1, %3$I = now() WHERE %2$I = $2',
                       i_family, v_p || '_gen', v_p || '_moved_at')
          USING v_new, v_x;
        EXECUTE format('TRUNCATE pgque.%I', i_family || '_' || v_x);
        v_done := v_done + 1;
    END LOOP;
    RETURN v_done;
END;
$$;
