#!/usr/bin/env bash
# test.sh — THE test command (README, CI): setup, lint, then the whole Go
# test suite against a real PostgreSQL.
#
# Without PGQUE_TEST_DSN it starts one throwaway, durability-off cluster
# (pgquectl dev --fast in a temp dir) for all test binaries and destroys it
# on exit. With PGQUE_TEST_DSN set (a superuser DSN) it uses that server.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/lint.sh

work="$(mktemp -d "${TMPDIR:-/tmp}/pgquectl-test.XXXXXX")"
chmod 755 "$work" # as root, PostgreSQL runs as postgres and must enter it
state="$work/pg"
cleanup() {
    if [ -x "$work/pgquectl" ]; then
        "$work/pgquectl" dev destroy --state-dir "$state" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

echo "== go build"
go build -o "$work/pgquectl" ./cmd/pgquectl

if [ -z "${PGQUE_TEST_DSN:-}" ]; then
    echo "== test cluster"
    "$work/pgquectl" dev --state-dir "$state" --fast --no-tick
    PGQUE_TEST_DSN="$("$work/pgquectl" dev dsn --state-dir "$state" --db postgres)"
    export PGQUE_TEST_DSN
fi
echo "== go test (PGQUE_TEST_DSN=$PGQUE_TEST_DSN)"
# PGQUE_BENCH_SMOKE=1: bench/sub-second runs its --quick profile (< 3 min) as a
# smoke test that asserts it runs and reports, not its timings.
PGQUE_BENCH_SMOKE=1 go test -count=1 -timeout 40m ./...
