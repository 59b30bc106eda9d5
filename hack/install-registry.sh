#!/usr/bin/env bash
# make tools: the end-to-end tests push to a real registry, Debian's
# docker-registry (the CNCF distribution registry), and the CI templates'
# tests run jobs through gitlab-ci-local, which copies a job's files with
# rsync. Both are installed from Debian's packages when missing; the test
# harness starts and stops the registry.
set -euo pipefail
missing=()
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
"$(dirname "$0")/apt-install.sh" "${missing[@]}"
docker-registry --version
