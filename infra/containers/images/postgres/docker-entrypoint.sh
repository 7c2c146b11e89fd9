#!/bin/bash
# The official postgres image's entry point, reduced to what tests use: initialise $PGDATA once
# (superuser POSTGRES_USER with POSTGRES_PASSWORD, database POSTGRES_DB), then exec postgres as
# the postgres user with the given arguments.
set -euo pipefail
if [[ ${1:-} == -* ]]; then set -- postgres "$@"; fi
if [[ ${1:-} != postgres ]]; then exec "$@"; fi
if [[ $(id -u) == 0 ]]; then
  mkdir -p "$PGDATA"
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
if [[ ! -s $PGDATA/PG_VERSION ]]; then
  if [[ -z ${POSTGRES_PASSWORD:-} && $auth != trust ]]; then
    echo "Error: set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust)" >&2
    exit 1
  fi
  initdb --username="$user" --encoding=UTF8 --locale=C.UTF-8 --pwfile=<(printf '%s\n' "${POSTGRES_PASSWORD:-}") \
    --auth-local=trust --auth-host="$auth" -D "$PGDATA" >/dev/null
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  echo "host all all all $auth" >>"$PGDATA/pg_hba.conf"
  if [[ $db != postgres ]]; then
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c port=${PGPORT:-5432}" -w start >/dev/null
    createdb --username="$user" "$db"
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  echo "PostgreSQL init process complete; ready for start up."
fi
exec "$@"
