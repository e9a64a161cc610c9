-- 99_record_version.sql: record the installed engine version (last file of
-- the install; a re-run of the same version adds nothing).
INSERT INTO pgque.engine_version (version, version_num)
VALUES ('0.1.0', 100)
ON CONFLICT (version_num) DO NOTHING;
