#!/usr/bin/env bash
# A Docker engine for the container runs: `engine.sh up` uses an engine that already answers as
# it is; otherwise it installs Debian's docker.io if dockerd is absent (as root) and starts
# dockerd, recording exactly what it started in $RUN (.run/docker/): the pid and the process's
# start time, so `engine.sh down` stops that process and nothing else (a recycled pid is never
# signalled). `engine.sh status` says which case holds.
#
# dockerd runs with --bridge=none --iptables=false: containers get host networking (or none),
# so all traffic stays on loopback and the host's firewall is left alone. Storage: overlay2,
# or vfs where overlay cannot be mounted (OBSINGEST_DOCKER_STORAGE_DRIVER forces one);
# OBSINGEST_DOCKER_DATA_ROOT puts images and containers elsewhere than /var/lib/docker.
set -euo pipefail
RUN=${OBSINGEST_DOCKER_RUN_DIR:-$(pwd)/.run/docker}
DOCKER=${OBSINGEST_DOCKER_CLI:-docker}
export DOCKER_BUILDKIT=0

answers() { timeout 10 "$DOCKER" info >/dev/null 2>&1; }

starttime() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null || true; }

ours_alive() {
  [[ -f $RUN/dockerd.started ]] || return 1
  local pid start _driver
  read -r pid start _driver <"$RUN/dockerd.started"
  [[ -n $pid && $(starttime "$pid") == "$start" ]]
}

install() {
  command -v dockerd >/dev/null 2>&1 && command -v "$DOCKER" >/dev/null 2>&1 && return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "engine: dockerd is not installed; run as root or apt-get install docker.io" >&2
    exit 1
  fi
  echo "engine: installing Debian's docker.io" >&2
  apt-get update -qq -o DPkg::Lock::Timeout=600
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
    docker.io >/dev/null
}

start_with() {  # $1: storage driver; returns 0 once the engine answers
  mkdir -p "$RUN"
  local extra=()
  [[ -n ${OBSINGEST_DOCKER_DATA_ROOT:-} ]] && extra+=(--data-root "$OBSINGEST_DOCKER_DATA_ROOT")
  setsid dockerd "${extra[@]}" --bridge=none --iptables=false --ip6tables=false --storage-driver="$1" \
    --pidfile="$RUN/dockerd.pid" >>"$RUN/dockerd.log" 2>&1 </dev/null &
  local pid=$!
  for _ in $(seq 1 120); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "engine: dockerd ($1) exited; log tail:" >&2
      tail -5 "$RUN/dockerd.log" >&2
      return 1
    fi
    if answers; then
      echo "$pid $(starttime "$pid") $1" >"$RUN/dockerd.started"
      echo "engine: started dockerd pid $pid (storage $1), recorded in $RUN/dockerd.started" >&2
      return 0
    fi
    sleep 0.5
  done
  echo "engine: dockerd ($1) did not answer in 60 s; stopping it" >&2
  kill -TERM "$pid" 2>/dev/null || true
  return 1
}

up() {
  if answers; then
    ours_alive && echo "engine: running (started by us earlier)" >&2 \
      || echo "engine: an engine already answers; using it as it is" >&2
    return 0
  fi
  install
  if [[ $(id -u) -ne 0 ]]; then
    echo "engine: no engine answers and only root may start dockerd here" >&2
    exit 1
  fi
  if [[ -n ${OBSINGEST_DOCKER_STORAGE_DRIVER:-} ]]; then
    start_with "$OBSINGEST_DOCKER_STORAGE_DRIVER"
  else
    start_with overlay2 || start_with vfs
  fi
}

down() {
  if ! [[ -f $RUN/dockerd.started ]]; then
    echo "engine: nothing started by us to stop" >&2
    return 0
  fi
  local pid start driver
  read -r pid start driver <"$RUN/dockerd.started"
  if ours_alive; then
    kill -TERM "$pid"
    for _ in $(seq 1 90); do
      [[ $(starttime "$pid") == "$start" ]] || break
      sleep 0.5
    done
    if [[ $(starttime "$pid") == "$start" ]]; then
      echo "engine: dockerd $pid ignored SIGTERM for 45 s; SIGKILL" >&2
      kill -KILL "$pid"
    fi
    echo "engine: stopped dockerd pid $pid" >&2
  else
    echo "engine: dockerd pid $pid (ours) is already gone" >&2
  fi
  rm -f "$RUN/dockerd.started"
}

status() {
  if ours_alive; then echo "ours: $(cat "$RUN/dockerd.started")"
  elif answers; then echo "running, not ours"
  else echo "none"; fi
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
