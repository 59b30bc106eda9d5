#!/usr/bin/env bash
# apt-install.sh PACKAGE...: installs Debian packages, as root or through
# sudo; nothing when none is given. The make targets' install scripts
# name the packages whose commands are missing.
set -euo pipefail
[[ $# -eq 0 ]] && exit 0
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "installing $* needs root or sudo" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
