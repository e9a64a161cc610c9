-- 99_record_version.sql: record the installed engine version (last file of
-- the install; a re-run of the same version adds nothing).
INSERT INTO pgque.engine_version (version, version_num)
VALUES ('0.2.0', 200)
ON CONFLICT (version_num) DO NOTHING;
