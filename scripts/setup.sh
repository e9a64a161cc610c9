#!/usr/bin/env bash
# setup.sh — install what pgquectl's dev environment, tests and CI need, on
# Debian / Ubuntu: the PostgreSQL server with pg_cron, PgQ (postgresql-NN-pgq3
# and pgqd, the benchmark baseline), npm (scripts/pgbins.sh fetches the other
# PostgreSQL majors of the test matrix with it) and staticcheck. Idempotent:
# when everything is there it changes nothing (and needs no network).
#
#   bash scripts/setup.sh                 # as root, or a user with sudo
#   PG_MAJOR=16 bash scripts/setup.sh     # another PostgreSQL major
set -euo pipefail

PG_MAJOR="${PG_MAJOR:-15}"
STATICCHECK_VERSION="${STATICCHECK_VERSION:-v0.8.2}"
# postgresql-server-dev: scripts/pgcron16.sh builds pg_cron 1.6 against it
# (installing it may upgrade the server package: do it before any cluster starts).
packages=("postgresql-$PG_MAJOR" "postgresql-$PG_MAJOR-cron" "postgresql-$PG_MAJOR-pgq3" pgqd "postgresql-server-dev-$PG_MAJOR")

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

# Any npm will do (e.g. the one in NodeSource's nodejs): Debian's only when none.
if ! command -v npm >/dev/null; then
    missing+=(npm)
fi

if [ "${#missing[@]}" -gt 0 ]; then
    if ! command -v apt-get >/dev/null; then
        echo "setup: missing ${missing[*]} and no apt-get here: install PostgreSQL $PG_MAJOR with pg_cron by hand" >&2
        exit 1
    fi
    echo "setup: installing ${missing[*]}"
    # pgquectl runs its own clusters: do not let the package create and
    # start the default one on port 5432.
    $sudo mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.d/pgquectl.conf >/dev/null
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
else
    echo "setup: PostgreSQL $PG_MAJOR, pg_cron, PgQ, pgqd and npm are installed"
fi

if ! command -v go >/dev/null; then
    echo "setup: the go command is not on PATH (expected /usr/local/go/bin/go): install Go first" >&2
    exit 1
fi
gobin="$(go env GOBIN)"
if [ -z "$gobin" ]; then
    gobin="$(go env GOPATH)/bin"
fi
if command -v staticcheck >/dev/null || [ -x "$gobin/staticcheck" ]; then
    echo "setup: staticcheck is installed"
else
    echo "setup: installing staticcheck $STATICCHECK_VERSION into $gobin"
    (cd / && go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION")
fi
