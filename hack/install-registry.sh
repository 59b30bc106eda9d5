#!/usr/bin/env bash
# make tools: the end-to-end tests push to a real registry, Debian's
# docker-registry (the CNCF distribution registry). Installed from Debian's
# packages when missing; the test harness starts and stops it.
set -euo pipefail
if command -v docker-registry >/dev/null 2>&1; then
  exit 0
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "installing docker-registry needs root or sudo" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
docker-registry --version
