-- 050_setting_spec.sql: every installation setting's one definition - its
-- default, its kind and range, its description - and the seeding of
-- pgque.settings from it. set_setting validates against it and resets to
-- its default; set_tick_period_ms and set_queue_config read the tick-period
-- range from it; pgquectl checks its own range constant against it.
--
-- pgque.setting_spec(): the installation settings' defaults and ranges.
-- kind: int and float (value BETWEEN min_value AND max_value), interval
-- (value >= min_value), bool (stored as 'true' / 'false'). NULL
-- default_value: the setting is unset by default.
-- Locks: none. Reads: nothing.
-- Called by: this file (seeding), set_setting, set_tick_period_ms,
-- set_queue_config, pgquectl's tests.
CREATE OR REPLACE FUNCTION pgque.setting_spec()
RETURNS TABLE (name text, kind text, default_value text, min_value text, max_value text, description text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    VALUES
    ('tick_period_ms', 'int', NULL, '1', '60000',
     'default tick period of queues in ms; NULL: classic PgQ thresholds (ticker_max_count / ticker_max_lag)'),
    ('meta_rotation_period_ms', 'int', NULL, '100', '3600000',
     'rotation period of the tick and subscription tables in ms; NULL: clamp(300 x tick period, 1 s, 30 s)'),
    ('meta_rotation_max_pages', 'int', '4', '1', '100000',
     'rotate the subscription table early once its current child has this many pages (dead tuples under a held xmin)'),
    ('ticker_slot_seconds', 'int', '60', '1', '3600',
     'length of one ticker_loop() run: it ends at the end of this epoch-aligned slot (plus the overrun)'),
    ('ticker_overrun_ms', 'int', '1500', '0', '600000',
     'how long ticker_loop() keeps ticking past its slot end so pg_cron 1.4''s queued next run takes over without a gap (2500 on pg_cron >= 1.5, where a standby run waits on the loop lock: the handover then avoids the second in which pg_cron starts its other jobs); at most half a slot'),
    ('ticker_classic_loop_ms', 'int', '1000', '1', '60000',
     'ticker_loop() round length when no tick period is set'),
    ('ticker_lock_timeout_ms', 'int', '20', '1', '10000',
     'how long one queue''s tick may wait for a lock before it is skipped until the next round'),
    ('notify_max_queue_usage', 'float', '0.001', '0', '1',
     'NOTIFY is skipped while pg_notification_queue_usage() is above this share (a stalled listener); consumers still poll'),
    ('cron_run_retention', 'interval', '1 day', '0', NULL,
     'age after which pgque''s rows in cron.job_run_details are purged'),
    ('ticker_loop_enabled', 'bool', 'true', NULL, NULL,
     'false makes a running ticker_loop() end within one round (set by pgque.stop(), cleared by pgque.start() and pgquectl tick)'),
    ('ticker_debug_round_ms', 'int', '0', '0', '600000',
     'ticker_loop() LOGs every round slower than this many ms with its phase timings; 0: off'),
    ('ticker_maint_ms', 'int', '0', '0', '3600000',
     'ticker_loop() runs pgque.maint() this often (ms) between its rounds while it holds the loop lock; 0: never. pgque.set_cron_version sets 10000 on every pg_cron version: no maintenance job starts a backend beside the loop')
$$;

-- Seed pgque.settings: a new setting gets its default; a value already set
-- stays (re-running upgrades), its description follows the spec.
INSERT INTO pgque.settings (name, value, description)
SELECT s.name, s.default_value, s.description FROM pgque.setting_spec() s
ON CONFLICT (name) DO NOTHING;
UPDATE pgque.settings t SET description = s.description
  FROM pgque.setting_spec() s
 WHERE t.name OPERATOR(pg_catalog.=) s.name
   AND t.description OPERATOR(pg_catalog.<>) s.description;
