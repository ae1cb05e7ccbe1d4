#!/bin/sh
# A throw-away PostgreSQL server for the tests of ctx-store-postgres and
# `ctx worker` (docs/testing.md). `cargo xtask test` starts one before the
# test suite and stops it after; by hand:
#
#   eval "$(scripts/postgres.sh start)"     # exports CTX_TEST_POSTGRES_URL
#   cargo nextest run -p ctx-store-postgres
#   scripts/postgres.sh stop
#
# Usage: scripts/postgres.sh start [DIR] | stop [DIR] | url [DIR]
#
# - The server is Debian's (`postgresql` package; installed with apt-get
#   when no `initdb` is found, as scripts/install-chromium.sh does for
#   Chromium).
# - PostgreSQL refuses to run as root, so as root the server runs as the
#   unprivileged user `ctxpg`, created on first use.
# - DIR (default: a directory under /tmp named after this checkout) holds
#   the cluster, its socket and its log; `start` runs initdb on first use,
#   then `pg_ctl start` on the first free port from 55432 up, listening on
#   127.0.0.1 only, with password (SCRAM) authentication for the superuser
#   `ctx` (password `ctx`: a test server on the loopback, nothing else).
# - `start` prints `export CTX_TEST_POSTGRES_URL=postgres://...` (the URL
#   of the database `ctx`); `url` prints the URL alone; `stop` stops the
#   server and keeps DIR, so a later `start` is quick.
set -eu

cmd=${1:-}
root=$(cd "$(dirname "$0")/.." && pwd)
default_dir="/tmp/ctx-postgres-$(printf '%s' "$root" | cksum | cut -d' ' -f1)"
dir=${2:-$default_dir}

find_bin() {
    for d in "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/x)")" /usr/lib/postgresql/*/bin; do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        # `su` with an explicit shell: ctxpg is a system user with no login shell.
        su -s /bin/sh ctxpg -c "$*"
    else
        sh -c "$*"
    fi
}

ensure_server() {
    if ! bin=$(find_bin); then
        if ! command -v apt-get >/dev/null 2>&1; then
            echo "postgres.sh: no initdb found and no apt-get to install PostgreSQL" >&2
            exit 1
        fi
        SUDO=""
        [ "$(id -u)" -ne 0 ] && SUDO="sudo"
        echo "postgres.sh: installing Debian's postgresql package" >&2
        $SUDO apt-get update >&2
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends postgresql >&2
        bin=$(find_bin)
    fi
    if [ "$(id -u)" -eq 0 ] && ! id ctxpg >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin ctxpg
    fi
}

url_of() {
    port=$(cat "$dir/port")
    echo "postgres://ctx:ctx@127.0.0.1:$port/ctx"
}

case "$cmd" in
start)
    ensure_server
    mkdir -p "$dir"
    chmod 755 "$dir"
    [ "$(id -u)" -eq 0 ] && chown ctxpg "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_owner "printf 'ctx\n' > '$dir/pwfile' && '$bin/initdb' -D '$dir/data' -U ctx --pwfile='$dir/pwfile' --auth=scram-sha-256 -E UTF8 --locale=C.UTF-8 >'$dir/initdb.log' 2>&1" || {
            cat "$dir/initdb.log" >&2
            exit 1
        }
        fresh=1
    else
        fresh=0
    fi
    if as_owner "'$bin/pg_ctl' -D '$dir/data' status" >/dev/null 2>&1; then
        echo "export CTX_TEST_POSTGRES_URL=$(url_of)"
        exit 0
    fi
    # The port of the last start first, so a restarted server keeps its URL.
    port=$(cat "$dir/port" 2>/dev/null || echo 55432)
    while :; do
        if ! bash -c "echo > /dev/tcp/127.0.0.1/$port" 2>/dev/null; then
            if as_owner "'$bin/pg_ctl' -D '$dir/data' -l '$dir/server.log' -w -t 30 -o \"-p $port -k '$dir' -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off\" start" >/dev/null 2>&1; then
                break
            fi
        fi
        if [ "$port" -gt 55532 ]; then
            port=55432
        else
            port=$((port + 1))
        fi
        tries=$((${tries:-0} + 1))
        if [ "$tries" -gt 101 ]; then
            echo "postgres.sh: could not start a server on any port 55432..55532; see $dir/server.log" >&2
            tail -n 20 "$dir/server.log" >&2 || true
            exit 1
        fi
    done
    echo "$port" >"$dir/port"
    if [ "$fresh" -eq 1 ]; then
        psql="$bin/psql"
        [ -x "$psql" ] || psql=psql
        PGPASSWORD=ctx "$psql" -q -h 127.0.0.1 -p "$port" -U ctx -d postgres -c "CREATE DATABASE ctx" >&2
    fi
    echo "export CTX_TEST_POSTGRES_URL=$(url_of)"
    ;;
stop)
    bin=$(find_bin) || exit 0
    if [ -f "$dir/data/PG_VERSION" ]; then
        as_owner "'$bin/pg_ctl' -D '$dir/data' -m fast -w stop" >/dev/null 2>&1 || true
    fi
    ;;
url)
    url_of
    ;;
*)
    echo "usage: scripts/postgres.sh start [DIR] | stop [DIR] | url [DIR]" >&2
    exit 2
    ;;
esac
