#!/usr/bin/env bash
# Builds the CPU container image from the Dockerfile with Debian's buildah,
# FROM the local Debian bookworm base that scripts/container-base.sh makes
# (no image registry is reachable on the build machine). Prints the build time
# and the image size. Not part of CI (a full compile inside the image: ~5 min
# with 2 jobs); run by hand, then scripts/container-smoke.sh.
#
#   scripts/container-build.sh
#   IMAGE=localhost/specverify:cpu BASE_IMAGE=localhost/debian:bookworm JOBS=2 scripts/container-build.sh
#
# BUILDAH_ISOLATION (default chroot: RUN steps need no OCI runtime, cgroups
# or user namespaces, which a sandboxed build machine may lack) and
# STORAGE_DRIVER (e.g. vfs where overlay mounts fail) are read by buildah.
# Extra arguments go to `buildah bud` (e.g. --no-cache).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=${BASE_IMAGE:-localhost/debian:bookworm}
IMAGE=${IMAGE:-localhost/specverify:cpu}
JOBS=${JOBS:-2}
export BUILDAH_ISOLATION=${BUILDAH_ISOLATION:-chroot}

need=()
command -v buildah >/dev/null || need+=(buildah)
command -v podman >/dev/null || need+=(podman)
if [ ${#need[@]} -gt 0 ]; then
  echo "container-build: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ "$BASE_IMAGE" = localhost/debian:bookworm ] && ! buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
  scripts/container-base.sh
fi

# The version GetServerInfo reports: the build context has no .git.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then commit="$commit-dirty"; fi

start=$(date +%s)
# --format docker: the OCI image format has no HEALTHCHECK. --layers: the
# package-installing steps are cached between builds.
buildah bud --format docker --layers \
  --build-arg BASE_IMAGE="$BASE_IMAGE" \
  --build-arg JOBS="$JOBS" \
  --build-arg SPECVERIFY_GIT_COMMIT="$commit" \
  -t "$IMAGE" -f Dockerfile "$@" .
elapsed=$(( $(date +%s) - start ))

size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
echo "container-build: $IMAGE built in ${elapsed} s (JOBS=$JOBS, commit $commit), $((size / 1000000)) MB ($size bytes)"
podman image ls "$IMAGE"
