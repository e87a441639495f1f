#!/usr/bin/env bash
# Runs the container image that scripts/container-build.sh built and drives it
# with the load generator built on the host, on loopback only:
#   1. podman run (the image's own ENTRYPOINT/CMD, --device=auto: the CPU
#      backend here), gRPC and /metrics published on 127.0.0.1 ports;
#   2. the process in the container runs as the image's non-root user;
#   3. the image's HEALTHCHECK (podman healthcheck run) reports healthy;
#   4. build/client/specverify-loadgen waits for grpc.health.v1 SERVING, then
#      closed loops at concurrency 1 and 8 for SMOKE_SECONDS each (every
#      answer checked against the oracle, 5% of the KV handles fetched and
#      compared byte for byte, /metrics scraped), then one inline-KV step;
#      any wrong answer or RPC error fails;
#   5. GetServerInfo's version carries the commit the image was built from;
#   6. podman stop (SIGTERM): the server drains and exits 0.
# Not part of CI (it needs the image, ~5 min to build); run by hand:
#   scripts/container-smoke.sh                   # IMAGE=localhost/specverify:cpu
#   SMOKE_SECONDS=10 scripts/container-smoke.sh
#   SMOKE_NETWORK=host scripts/container-smoke.sh  # no CNI bridge on the machine
#
# PODMAN_RUN_OPTS replaces the options this script passes to `podman run`
# for this build machine's sandbox (see docs/DEPLOY.md): runc instead of crun
# (crun refuses cgroup v1/v2 hybrid hierarchies), and explicit ulimits (the
# sandbox has no CAP_SYS_RESOURCE, so podman's default RLIMIT_NOFILE and
# RLIMIT_NPROC, above the hard limits here, cannot be set).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-localhost/specverify:cpu}
LOADGEN=${LOADGEN:-build/client/specverify-loadgen}
SMOKE_SECONDS=${SMOKE_SECONDS:-5}
SMOKE_NETWORK=${SMOKE_NETWORK:-bridge}
OUT_DIR=${OUT_DIR:-build/container-smoke}
if [ -z "${PODMAN_RUN_OPTS+set}" ]; then
  # crun (podman's default on bookworm) refuses a cgroup v1/v2 hybrid
  # hierarchy, which this build machine has; Debian's runc runs there. A fresh
  # machine has no runc: installed here, as the other container scripts
  # install what they need (a fresh clone's run failed with crun's "cgroups
  # in hybrid mode not supported" before this).
  if ! command -v runc >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "container-smoke: installing runc"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runc >/dev/null
  fi
  PODMAN_RUN_OPTS="--ulimit=nofile=$(ulimit -Hn):$(ulimit -Hn) --ulimit=nproc=4096:4096"
  if command -v runc >/dev/null; then PODMAN_RUN_OPTS="--runtime=runc $PODMAN_RUN_OPTS"; fi
fi

fail() { echo "container-smoke: FAIL: $*" >&2; exit 1; }

podman image exists "$IMAGE" || fail "no image $IMAGE (scripts/container-build.sh builds it)"
if [ ! -x "$LOADGEN" ]; then
  [ -f build/build.ninja ] || fail "$LOADGEN missing; build it: scripts/build.sh (or cmake --build build --target specverify-loadgen)"
  cmake --build build -j "${JOBS:-1}" --target specverify-loadgen
fi
mkdir -p "$OUT_DIR"

# Two free loopback ports for the published gRPC and metrics ports.
read -r grpc_port metrics_port < <(/usr/bin/python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')

name="specverify-smoke-$$"
cleanup() { podman rm -f -t 5 "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# podman logs an error per healthcheck timer it cannot create without
# systemd; the checks below run the healthcheck by hand instead.
# shellcheck disable=SC2086
if [ "$SMOKE_NETWORK" = host ]; then
  # The image's HEALTHCHECK assumes port 50051; here the server listens on
  # the free port, so the same command is given that port.
  podman run -d --name "$name" $PODMAN_RUN_OPTS --network=host \
    --health-cmd "specverify-loadgen --address=127.0.0.1:$grpc_port --connect-timeout=3s --wait-for-serving=3s --requests=1 --warmup=0s --concurrency=1 --pool-requests=1 --gamma=1 --sequences-per-request=1 --row-bytes=0 --kv-return=none --max-error-fraction=0 --quiet" \
    "$IMAGE" --listen_address=127.0.0.1:"$grpc_port" --metrics_address=127.0.0.1:"$metrics_port" \
    --device=auto >/dev/null 2> >(grep -v 'systemd' >&2)
else
  podman run -d --name "$name" $PODMAN_RUN_OPTS \
    -p 127.0.0.1:"$grpc_port":50051 -p 127.0.0.1:"$metrics_port":9401 \
    "$IMAGE" >/dev/null 2> >(grep -v 'systemd' >&2)
fi
echo "container-smoke: $IMAGE running as $name; gRPC 127.0.0.1:$grpc_port, metrics 127.0.0.1:$metrics_port"

# Start-up: the server prints "listening on port N" once gRPC is up (before
# that a client's first connection is refused, and gRPC's reconnect backoff,
# 1 s then x1.6, would inflate a time measured by the client).
start=$(date +%s.%N)
for _ in $(seq 600); do
  grep -q 'listening on port' <<<"$(podman logs "$name" 2>&1)" && break
  [ "$(podman inspect "$name" --format '{{.State.Running}}')" = true ] ||
    { podman logs "$name"; fail "the container exited"; }
  sleep 0.1
done
grep -q 'listening on port' <<<"$(podman logs "$name" 2>&1)" || fail "not listening 60 s after podman run"
echo "container-smoke: gRPC listening $(/usr/bin/python3 -c "print(f'{$(date +%s.%N) - $start:.2f}')") s after podman run"
# 4 (its first part). The load generator's health wait: SERVING, then one checked answer.
"$LOADGEN" --address=127.0.0.1:"$grpc_port" --wait-for-serving=60s --connect-timeout=60s \
  --requests=1 --warmup=0s --concurrency=1 --quiet > "$OUT_DIR/first-request.txt" 2>&1 ||
  { cat "$OUT_DIR/first-request.txt"; podman logs "$name"; fail "the server did not become SERVING"; }
echo "container-smoke: SERVING, first answer checked"
podman logs "$name" 2>&1 | sed 's/^/  server: /'

# 2. Non-root.
uid=$(podman exec "$name" id -u)
[ "$uid" != 0 ] || fail "the server runs as root"
echo "container-smoke: the server runs as uid $uid ($(podman exec "$name" id -un))"

# 3. The image's HEALTHCHECK.
health=$(podman healthcheck run "$name" 2>&1 | grep -v systemd || true)
[ -z "$health" ] || [ "$health" = healthy ] || fail "podman healthcheck run: $health"
status=$(podman inspect "$name" --format '{{.State.Health.Status}}' 2>/dev/null || podman inspect "$name" --format '{{.State.Healthcheck.Status}}')
[ "$status" = healthy ] || fail "health status is '$status' after podman healthcheck run"
echo "container-smoke: HEALTHCHECK: $status"

# 4. Load, every answer checked; exit 1 on a wrong answer, 3 on RPC errors.
rc=0
"$LOADGEN" --address=127.0.0.1:"$grpc_port" --concurrency=1,8 --duration="${SMOKE_SECONDS}s" \
  --warmup=1s --gamma=8 --alpha=0.6 --sequences-per-request=4 --row-bytes=512 \
  --fetch-kv-fraction=0.05 --max-error-fraction=0 --quiet \
  --metrics-url=http://127.0.0.1:"$metrics_port"/metrics \
  --json="$OUT_DIR/loadgen-handle.json" > "$OUT_DIR/loadgen-handle.txt" 2>&1 || rc=$?
cat "$OUT_DIR/loadgen-handle.txt"
[ "$rc" = 0 ] || fail "specverify-loadgen (KV handles) exited $rc"
"$LOADGEN" --address=127.0.0.1:"$grpc_port" --concurrency=8 --duration="${SMOKE_SECONDS}s" \
  --warmup=1s --gamma=8 --sequences-per-request=4 --row-bytes=4096 --kv-return=inline \
  --max-error-fraction=0 --quiet \
  --json="$OUT_DIR/loadgen-inline.json" > "$OUT_DIR/loadgen-inline.txt" 2>&1 || rc=$?
cat "$OUT_DIR/loadgen-inline.txt"
[ "$rc" = 0 ] || fail "specverify-loadgen (inline KV) exited $rc"
metrics=$(curl -sf "http://127.0.0.1:$metrics_port/metrics") || fail "cannot scrape /metrics"
grep -q '^specverify_' <<<"$metrics" || fail "no specverify_ series on /metrics"

# 5. The version stamp (the build context has no .git; container-build.sh passes it).
server_line=$(grep -m1 '^server ' "$OUT_DIR/loadgen-handle.txt")
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
case "$server_line" in
  *"+$commit"*) echo "container-smoke: image version matches HEAD ($commit)" ;;
  *) echo "container-smoke: note: image version is not HEAD $commit: $server_line" ;;
esac

# 6. SIGTERM: drain and exit 0.
podman stop -t 30 "$name" >/dev/null 2> >(grep -v systemd >&2)
code=$(podman inspect "$name" --format '{{.State.ExitCode}}')
logs=$(podman logs "$name" 2>&1)
tail -2 <<<"$logs" | sed 's/^/  server: /'
[ "$code" = 0 ] || fail "the server exited $code on SIGTERM"
grep -q 'draining' <<<"$logs" || fail "no drain on SIGTERM"
echo "container-smoke: SIGTERM drained, exit 0"
echo "container-smoke: PASS ($IMAGE, $(( $(podman image inspect --format '{{.Size}}' "$IMAGE") / 1000000 )) MB)"
