#!/usr/bin/env bash
# Runs a command beside a throw-away PostgreSQL server, with MASE_TEST_POSTGRES_URL pointing at it:
#
#   scripts/with-postgres.sh cargo test --workspace --locked
#
# The server listens on 127.0.0.1 only, on a free port, with its data directory in a fresh
# temporary folder; both are removed when the command ends, however it ends. It takes TLS and
# plain connections: a throw-away CA signs its certificate (issued for 127.0.0.1), and
# MASE_TEST_POSTGRES_CA names that CA's certificate, MASE_TEST_POSTGRES_OTHER_CA another CA's
# (for the tests of a certificate that does not verify). Without `openssl` the server runs
# without TLS and the two variables stay unset. PostgreSQL comes
# from Debian's packages: when pg_ctl is missing and we are root, the script installs the
# `postgresql` package. Without PostgreSQL (and no way to install it) the command runs anyway
# without MASE_TEST_POSTGRES_URL: the storage tests then run against SQLite only and say so
# (under CI=true they fail instead).
set -euo pipefail

if [ $# -eq 0 ]; then
    echo "usage: scripts/with-postgres.sh COMMAND [ARGS...]" >&2
    exit 2
fi

say() { echo "with-postgres: $*" >&2; }

# The newest /usr/lib/postgresql/*/bin (Debian's layout), else the folder of pg_ctl on PATH.
find_bin() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ]; then
            echo "$d"
            return 0
        fi
    done
    if command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v pg_ctl)"
        return 0
    fi
    return 1
}

PGBIN="$(find_bin || true)"
if [ -z "$PGBIN" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing PostgreSQL from Debian's packages"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    PGBIN="$(find_bin || true)"
fi
if [ -z "$PGBIN" ]; then
    say "PostgreSQL not found; running without it (storage tests run against SQLite only)"
    exec "$@"
fi

# initdb refuses to run as root: the server then runs as the `postgres` user the package made
# (or a system user made here).
OSUSER="$(id -un)"
if [ "$(id -u)" = 0 ]; then
    OSUSER=postgres
    if ! id "$OSUSER" >/dev/null 2>&1; then
        OSUSER=mase-pg
        id "$OSUSER" >/dev/null 2>&1 || useradd --system --no-create-home "$OSUSER"
    fi
fi
as_server() {
    if [ "$(id -u)" = 0 ]; then runuser -u "$OSUSER" -- "$@"; else "$@"; fi
}

WORK="$(mktemp -d "${TMPDIR:-/tmp}/mase-pg.XXXXXX")"
STARTED=0
cleanup() {
    if [ "$STARTED" = 1 ]; then
        as_server "$PGBIN/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 700 "$WORK"
[ "$(id -u)" = 0 ] && chown "$OSUSER" "$WORK"

# Password login over TCP (so that a wrong password can be tested), trust on the private socket.
PASSWORD="mase-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$PASSWORD" > "$WORK/pwfile"
[ "$(id -u)" = 0 ] && chown "$OSUSER" "$WORK/pwfile"
as_server "$PGBIN/initdb" -D "$WORK/data" -U mase --pwfile="$WORK/pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    -E UTF8 --locale=C >"$WORK/initdb.log" 2>&1 || { cat "$WORK/initdb.log" >&2; say "initdb failed"; exit 1; }

# TLS: a CA, a server certificate it signs for 127.0.0.1, and a second, unrelated CA.
TLS_OPTS=""
if command -v openssl >/dev/null 2>&1; then
    make_ca() {
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
            -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
            -keyout "$WORK/$1.key" -out "$WORK/$1.crt" >"$WORK/openssl.log" 2>&1
    }
    printf '%s\n' "subjectAltName=IP:127.0.0.1" "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
        "extendedKeyUsage=serverAuth" >"$WORK/server.ext"
    if make_ca ca "mase-rs test CA" && make_ca other-ca "mase-rs unrelated CA" &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
            -keyout "$WORK/server.key" -out "$WORK/server.csr" >>"$WORK/openssl.log" 2>&1 &&
        openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
            -extfile "$WORK/server.ext" -out "$WORK/server.crt" >>"$WORK/openssl.log" 2>&1; then
        chmod 600 "$WORK/server.key"
        [ "$(id -u)" = 0 ] && chown "$OSUSER" "$WORK/server.key" "$WORK/server.crt"
        TLS_OPTS="-c ssl=on -c ssl_cert_file=$WORK/server.crt -c ssl_key_file=$WORK/server.key"
    else
        cat "$WORK/openssl.log" >&2
        say "could not make the test certificates; the server runs without TLS"
    fi
else
    say "openssl not found; the server runs without TLS (the TLS tests are skipped)"
fi

# A free port: try random ones until a server starts (bounded).
PORT=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
    candidate=$((20000 + RANDOM % 40000))
    if (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then
        continue
    fi
    if as_server "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $candidate -k $WORK -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 $TLS_OPTS" \
        start >/dev/null; then
        PORT="$candidate"
        STARTED=1
        break
    fi
done
if [ -z "$PORT" ]; then
    cat "$WORK/server.log" >&2 || true
    say "could not start PostgreSQL"
    exit 1
fi
as_server "$PGBIN/createdb" -h "$WORK" -p "$PORT" -U mase mase_test

export MASE_TEST_POSTGRES_URL="postgresql://mase:$PASSWORD@127.0.0.1:$PORT/mase_test"
if [ -n "$TLS_OPTS" ]; then
    export MASE_TEST_POSTGRES_CA="$WORK/ca.crt" MASE_TEST_POSTGRES_OTHER_CA="$WORK/other-ca.crt"
fi
say "PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT${TLS_OPTS:+ with TLS} (data in $WORK)"
status=0
"$@" || status=$?
exit "$status"
