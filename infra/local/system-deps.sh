#!/usr/bin/env bash
# Debian packages the project needs on a fresh machine. Installs only what is missing, so it is
# cheap to run on every setup: fpack/funpack (compression reference and round-trip checks),
# PostgreSQL server (registry in integration tests), a JDK and Maven (Kafka broker jars), a C
# compiler (the edge's RICE_1 coder, producers/compress/_rice.c), iptables (an integration test
# drops a private port's packets: a PostgreSQL server gone without a reset).
# Go (fake-gcs-server, the pstest server) is not installed here: Debian's is too old.
set -euo pipefail
need=()
command -v fpack >/dev/null 2>&1 || need+=(libcfitsio-bin)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
command -v java >/dev/null 2>&1 || need+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)  # fetches the Kafka broker jars once
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v iptables >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v iptables >/dev/null 2>&1 || need+=(iptables)
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]] && ! command -v sudo >/dev/null; then
    echo "missing Debian packages: ${need[*]} (run as root or install them)" >&2
    exit 1
  fi
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  echo "installing Debian packages: ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
