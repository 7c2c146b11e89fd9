#!/usr/bin/env bash
# `make test` after ruff: the native suite (`pytest -m "not containers" tests`; tests/unit and
# tests/tools in a process of their own beside the rest) while the container images are checked or built in the
# background, then `make test-containers`.
#
# Why in the background: on a machine without the images a cold `make images` (debootstrap base,
# the stand-ins, the obsingest image) takes most of a quarter of an hour, nearly all of it
# waiting on Debian's mirror, dockerd and the disk; run first it would add that much to
# `make test`. It starts at once (the engine as `make docker` starts it, then `make images`
# at a low CPU and I/O priority) and writes to .run/images/build.log; the containers' stage
# waits for it. A failed build fails `make test` with the tail of that log.
#
# What this started it stops, however it ends (a failed native suite, Ctrl-C, SIGTERM): the
# test sessions get SIGTERM and are waited for (tests/conftest.py makes that a Ctrl-C: the
# services a session started are stopped by it, none is left running for the next run in this
# checkout), the background build is killed and an engine that no engine answered before is
# stopped again. The native suite runs in the background with `wait` so that a signal reaches
# the trap at once (bash runs a trap only once a foreground command has ended).
#
#     infra/containers/make-test.sh [PYTHON]
set -uo pipefail
PY=${1:-.venv/bin/python}
ENGINE=infra/containers/engine.sh
RUN=$(pwd)/.run/images
LOG=$RUN/build.log
mkdir -p "$RUN"
rm -f "$RUN/rc" "$RUN/engine-ready"
started=$SECONDS
before=$(bash "$ENGINE" status)

# its own process group (setsid), so that an abort kills the build and every child it has;
# dockerd is started by engine.sh in a session of its own and survives that, to be stopped below
setsid bash -c '
  bash "$1" up || { echo 1 >"$2/rc"; exit 1; }
  touch "$2/engine-ready"
  nice -n 10 ionice -c 2 -n 7 "$3" -m infra.containers.images
  echo $? >"$2/rc"
' images-build "$ENGINE" "$RUN" "$PY" >"$LOG" 2>&1 </dev/null &
build=$!
echo "make test: container images building in the background (pid $build, log $LOG)" >&2

unit=
native=
finish() {  # $1: exit code; stops what this script started
  local rc=$1
  local session
  for session in $native $unit; do
    kill -TERM "$session" 2>/dev/null
  done
  for session in $native $unit; do
    wait "$session" 2>/dev/null
  done
  if kill -0 "$build" 2>/dev/null; then
    # never interrupt the engine's start half-way: it records the dockerd it starts only once
    # that answers (at most ~60 s), and only a recorded dockerd can be stopped exactly
    for _ in $(seq 1 140); do
      [[ -e $RUN/engine-ready || -e $RUN/rc ]] && break
      kill -0 "$build" 2>/dev/null || break
      sleep 0.5
    done
    kill -TERM -- "-$build" 2>/dev/null
    wait "$build" 2>/dev/null
    echo "make test: background image build stopped (log $LOG)" >&2
  fi
  if [[ $before == none ]]; then
    bash "$ENGINE" down || rc=1
  fi
  exit "$rc"
}
trap 'finish 130' INT TERM

# tests/unit and tests/tools beside the rest, in a process of their own at a low priority: pure
# logic and the pinned tools' checks (no services, no ports, no timing), they take the CPU the
# services' tests leave while those wait on processes, emulators and outages, instead of
# 3-4 min on their own at the end
UNIT_LOG=$(pwd)/.run/unit-tests.log
nice -n 10 "$PY" -m pytest -m "not containers" tests/unit tests/tools >"$UNIT_LOG" 2>&1 </dev/null &
unit=$!
"$PY" -m pytest -m "not containers" tests --ignore=tests/unit --ignore=tests/tools </dev/null &
native=$!
wait "$native"
rc=$?
native=
wait "$unit"
unit_rc=$?
unit=
echo "make test: tests/unit and tests/tools (run beside the above, output in $UNIT_LOG):" >&2
cat "$UNIT_LOG"
((rc == 0)) && rc=$unit_rc
if ((rc != 0)); then
  finish "$rc"
fi

waited=$SECONDS
while [[ ! -e $RUN/rc ]] && kill -0 "$build" 2>/dev/null; do
  sleep 2
done
wait "$build" 2>/dev/null
build_rc=$(cat "$RUN/rc" 2>/dev/null || echo 1)
echo "make test: image build ended after $((SECONDS - started)) s (waited $((SECONDS - waited)) s for it), exit $build_rc" >&2
if [[ $build_rc != 0 ]]; then
  echo "make test: the container images could not be built; tail of $LOG:" >&2
  tail -n 40 "$LOG" >&2
  finish 1
fi

# test-containers.sh stops the engine when none answered before *this* run, not before its own
OBSINGEST_ENGINE_BEFORE=$before bash infra/containers/test-containers.sh "$PY"
rc=$?
echo "make test: exit $rc after $((SECONDS - started)) s" >&2
exit "$rc"
