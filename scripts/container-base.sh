#!/usr/bin/env bash
# Makes the Debian bookworm base image of the CPU container image from
# Debian's own archive, for a machine that reaches Debian's archive but no
# image registry: mmdebstrap builds a minimal root file system (minbase:
# Essential packages + apt, no Recommends) into a tarball, and `podman import`
# turns it into the local image ${BASE_IMAGE:-localhost/debian:bookworm}.
# scripts/container-build.sh then builds FROM it (BASE_IMAGE build argument).
#
# Not part of CI (the bootstrap downloads ~100 MB of packages); run by hand:
#   scripts/container-base.sh            # reuse the image if it already exists
#   REBUILD=1 scripts/container-base.sh  # bootstrap again
# Needs the Debian packages mmdebstrap and podman (installed here if missing)
# and root (mmdebstrap's root mode; podman's system store).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=${BASE_IMAGE:-localhost/debian:bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}

need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v podman >/dev/null || need+=(podman)
if [ ${#need[@]} -gt 0 ]; then
  echo "container-base: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ "${REBUILD:-0}" != 1 ] && podman image exists "$BASE_IMAGE"; then
  echo "container-base: $BASE_IMAGE exists (REBUILD=1 to bootstrap it again)"
  podman image ls "$BASE_IMAGE"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball="$work/bookworm.tar"

# minbase: only Essential packages and apt; the image's own stages install
# what they need, without Recommends (the server needs no CA bundle: it makes
# no outbound TLS connections, and its own TLS files are mounted). Docs, man
# pages and locales are left out (dpkg path excludes), as Debian's slim
# images do. The apt sources inside the image are the mirror's, so
# `apt-get update` works in a build stage. The merged-usr hook lays out the
# merged /usr itself (as Debian's own images are) instead of installing
# usrmerge, which would bring perl (~50 MB) into the image.
start=$(date +%s)
# shellcheck disable=SC2016  # the hook's $1 (the root file system) is mmdebstrap's
mmdebstrap --variant=minbase --mode=root --format=tar \
  --aptopt='APT::Install-Recommends "false"' \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --aptopt='Acquire::Languages "none"' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
  bookworm "$tarball" \
  "deb $MIRROR bookworm main" \
  "deb $MIRROR bookworm-updates main" \
  "deb $SECURITY_MIRROR bookworm-security main"
echo "container-base: mmdebstrap took $(( $(date +%s) - start )) s, tarball $(du -h "$tarball" | cut -f1)"

podman import \
  --change 'CMD ["/bin/bash"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --message "mmdebstrap --variant=minbase bookworm from $MIRROR" \
  "$tarball" "$BASE_IMAGE" >/dev/null
podman image ls "$BASE_IMAGE"
