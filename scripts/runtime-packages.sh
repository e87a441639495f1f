#!/usr/bin/env bash
# Prints, one per line, the Debian packages that own the shared libraries the
# given binaries load, as this machine's package manager names them (so no
# package name is spelled out per distribution: Debian's libgrpc++1.51 is
# Ubuntu 24.04's libgrpc++1.51t64). A library no package owns stops it.
# Used by the Dockerfile's build stage and scripts/systemd-smoke.sh.
#
#   scripts/runtime-packages.sh build/server/specverify-server build/client/specverify-loadgen
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 <binary>..." >&2; exit 2; }
libs=$(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
for lib in $libs; do
  owner=$(dpkg-query -S "$lib" 2>/dev/null || dpkg-query -S "$(realpath "$lib")" 2>/dev/null) \
    || { echo "runtime-packages: no package owns $lib" >&2; exit 1; }
  # "pkg-a, pkg-b: /path" when several packages own the path.
  echo "${owner%%:*}"
done | tr ',' '\n' | sed 's/^ *//' | sort -u
