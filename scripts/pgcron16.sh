#!/usr/bin/env bash
# pgcron16.sh — build a private PostgreSQL 15 installation tree that carries
# pg_cron 1.6.7 (the version family managed providers run, with '1 seconds'
# schedules; Debian ships only 1.4.2), cache it, and print its bin directory.
#
#   bindir=$(bash scripts/pgcron16.sh)
#   PGQUE_PGCRON16_BINDIR=$bindir go test ./cmd/pgquectl/ -run Cron16
#
# Tests and the benchmark read PGQUE_PGCRON16_BINDIR; the tests that need
# pg_cron 1.6 skip with a note when it is unset.
#
# Input: pg_cron-1.6.7.tar.gz in $PGQUE_THIRD_PARTY (default: ../shared/third_party
# next to the repository). When the tarball is not there the script says so
# on stderr, prints nothing and exits 0: the 1.6 leg is optional.
#
# How: the Debian PostgreSQL 15 server binaries are relocatable, so a copy of
# /usr/lib/postgresql/15 and /usr/share/postgresql/15 with pg_cron 1.6.7
# installed into it runs beside the system's pg_cron 1.4.2 without touching
# it. Building needs postgresql-server-dev-15 (headers and pgxs); when it is
# missing the script installs it with apt-get. NOTE: that install may upgrade
# postgresql-15 itself, and a server started before the upgrade then fails to
# load plpgsql (undefined symbol): run this before starting any cluster.
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/pgquectl/pgcron16/<tarball sha256
# prefix>-<server version>, or /var/cache/pgquectl/pgcron16/... as root
# (the server runs as the postgres user, which cannot enter /root);
# rebuilt when the tarball or the server changes.
set -euo pipefail

PG_MAJOR=15
PG_CRON=pg_cron-1.6.7
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
third_party="${PGQUE_THIRD_PARTY:-$repo/../shared/third_party}"
tarball="$third_party/$PG_CRON.tar.gz"

if [ ! -f "$tarball" ]; then
    echo "pgcron16: $tarball not found: pg_cron 1.6 tests and bench phases will be skipped (set PGQUE_THIRD_PARTY to the directory holding $PG_CRON.tar.gz)" >&2
    exit 0
fi

sysbin="/usr/lib/postgresql/$PG_MAJOR/bin"
if [ ! -x "$sysbin/postgres" ]; then
    echo "pgcron16: PostgreSQL $PG_MAJOR server not installed ($sysbin/postgres): run bash scripts/setup.sh" >&2
    exit 1
fi

if [ ! -x "$sysbin/pg_config" ] || [ ! -f "/usr/include/postgresql/$PG_MAJOR/server/postgres.h" ]; then
    echo "pgcron16: installing postgresql-server-dev-$PG_MAJOR (headers and pgxs; may upgrade postgresql-$PG_MAJOR: restart clusters afterwards)" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        sudo="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >&2
    $sudo apt-get install -y -qq --no-install-recommends "postgresql-server-dev-$PG_MAJOR" </dev/null >&2
fi

sum="$(sha256sum "$tarball" | cut -c1-12)"
server="$("$sysbin/postgres" --version | awk '{print $3}')"
if [ -n "${XDG_CACHE_HOME:-}" ]; then
    cache="$XDG_CACHE_HOME/pgquectl/pgcron16"
elif [ "$(id -u)" -eq 0 ]; then
    cache=/var/cache/pgquectl/pgcron16
else
    cache="$HOME/.cache/pgquectl/pgcron16"
fi
dest="$cache/$sum-$server"
bindir="$dest/tree/usr/lib/postgresql/$PG_MAJOR/bin"

if [ -f "$dest/.complete" ] && [ -x "$bindir/postgres" ]; then
    echo "$bindir"
    exit 0
fi

mkdir -p "$cache"
# One builder at a time (tests may call this concurrently).
exec 9>"$cache/.lock"
flock 9
if [ -f "$dest/.complete" ] && [ -x "$bindir/postgres" ]; then
    echo "$bindir"
    exit 0
fi

work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "pgcron16: building $PG_CRON for PostgreSQL $server into $dest" >&2
tar xzf "$tarball" -C "$work"
make -s -C "$work/$PG_CRON" PG_CONFIG="$sysbin/pg_config" >&2
mkdir -p "$work/tree/usr/lib/postgresql" "$work/tree/usr/share/postgresql"
cp -a "/usr/lib/postgresql/$PG_MAJOR" "$work/tree/usr/lib/postgresql/"
cp -a "/usr/share/postgresql/$PG_MAJOR" "$work/tree/usr/share/postgresql/"
make -s -C "$work/$PG_CRON" install DESTDIR="$work/tree" PG_CONFIG="$sysbin/pg_config" >&2
chmod -R a+rX "$work/tree"
rm -rf "$dest"
mkdir -p "$dest"
mv "$work/tree" "$dest/tree"
touch "$dest/.complete"
echo "$bindir"
