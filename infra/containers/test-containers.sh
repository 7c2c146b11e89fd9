#!/usr/bin/env bash
# `make test-containers`: the integration contract suites and the containerised facility's
# tests (end-to-end run, downstream example, provenance) on the testcontainers backend.
# An engine is started if none answers and then stopped again; afterwards no container of
# this run may remain (the run fails if one does, after removing it), nor a Docker network that
# was not there before. "Of this run": every container a session starts carries the label
# org.obsingest.run=$OBSINGEST_TC_RUN (infra/containers/names.py), a value unique to this
# run; containers of other runs and other sessions on the same engine are never touched.
set -uo pipefail
PY=${1:-.venv/bin/python}
ENGINE=infra/containers/engine.sh
# make-test.sh passes what it found before it started the engine itself, in the background
before=${OBSINGEST_ENGINE_BEFORE:-$(bash "$ENGINE" status)}
started=$SECONDS
# unique to this run (host, pid, time, randomness): the value of every container's run label
export OBSINGEST_TC_RUN="run-$(hostname -s 2>/dev/null || echo host)-$$-$(date +%s)-$RANDOM$RANDOM"
mine="label=org.obsingest.run=$OBSINGEST_TC_RUN"
bash "$ENGINE" up || exit 1
rc=0
networks() { docker network ls -q --no-trunc | sort; }
networks_before=$(networks)
"$PY" -m infra.containers.images || rc=$?
if ((rc == 0)); then
  OBSINGEST_TEST_BACKEND=testcontainers OBSINGEST_TC_PRESTART=pubsub,gcs,postgres,kafka \
    "$PY" -m pytest -m "integration" \
    tests/integration/test_gcs_store.py::TestGcsStoreContract \
    tests/integration/test_publishers.py::TestPubSubPublisherContract \
    tests/integration/test_publishers.py::TestKafkaPublisherContract \
    tests/integration/test_registry_postgres.py::TestPostgresRegistryContract \
    tests/integration/containers || rc=$?
fi
left=$(docker ps -aq --filter "$mine")
if [[ -n $left ]]; then
  echo "test-containers: containers left behind: $(docker ps -a --filter "$mine" --format '{{.Names}} {{.Image}}' | tr '\n' ' ')" >&2
  docker rm -f $left >/dev/null
  rc=1
fi
if [[ $(networks) != "$networks_before" ]]; then
  echo "test-containers: the run left Docker networks behind:" >&2
  comm -13 <(echo "$networks_before") <(networks) >&2
  rc=1
fi
if [[ $before == none ]]; then
  bash "$ENGINE" down || rc=1
fi
echo "test-containers: exit $rc after $((SECONDS - started)) s" >&2
exit $rc
