#!/usr/bin/env bash
# make node-tools: the real node of the local test cluster runs its pods in
# Debian's containerd and runc, on the CNI plugins of Debian's
# containernetworking-plugins. They are installed when missing; the test
# harness starts its own containerd (own config, root, state and socket)
# and never uses or touches a containerd the machine already runs.
set -euo pipefail
missing=()
[[ -x /usr/bin/containerd ]] || missing+=(containerd)
[[ -x /usr/sbin/runc ]] || missing+=(runc)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
"$(dirname "$0")/apt-install.sh" "${missing[@]}"
containerd --version
