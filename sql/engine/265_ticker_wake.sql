-- pgque.ticker_wake: a row for every committed change that can make a queue
-- due other than an event: a queue created, dropped or reconfigured
-- (forced, paused, a threshold or period changed), a setting changed
-- (tick_period_ms, ticker_loop_enabled), a classic consumer subscribed, a
-- tick moved in time. ticker() and ticker_loop read it while they skip rounds under a
-- push load (the cluster's snapshot moves every round, so it cannot tell
-- such a change from an event): a row visible there ends the idle state.
-- Transactional on purpose - a change is seen with its commit, never
-- before it (a counter bumped at statement time could be read before the
-- change commits, and the round that read it would then miss it).
-- ticker_plan (and ticker_loop, before it) deletes the rows it sees
-- (their changes are in its due check); insert-only otherwise, no
-- contention between writers.
-- pgque.ticker_wake_note(): the trigger that adds a ticker_wake row (one
-- per changed row). Locks: none but the INSERT's. Writes: ticker_wake.
-- Called by: the triggers below (queue, settings: every row written;
-- subscription: rows inserted; tick: rows updated in place - rotation's
-- moves to another generation are a DELETE and an INSERT and fire nothing).
CREATE TABLE IF NOT EXISTS pgque.ticker_wake (
    wake_time timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE OR REPLACE FUNCTION pgque.ticker_wake_note()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    INSERT INTO pgque.ticker_wake DEFAULT VALUES;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER ticker_wake AFTER INSERT OR UPDATE OR DELETE ON pgque.queue
    FOR EACH ROW EXECUTE FUNCTION pgque.ticker_wake_note();
CREATE OR REPLACE TRIGGER ticker_wake AFTER INSERT OR UPDATE OR DELETE ON pgque.settings
    FOR EACH ROW EXECUTE FUNCTION pgque.ticker_wake_note();
CREATE OR REPLACE TRIGGER ticker_wake AFTER INSERT ON pgque.subscription
    FOR EACH ROW EXECUTE FUNCTION pgque.ticker_wake_note();
CREATE OR REPLACE TRIGGER ticker_wake AFTER UPDATE ON pgque.tick
    FOR EACH ROW EXECUTE FUNCTION pgque.ticker_wake_note();
