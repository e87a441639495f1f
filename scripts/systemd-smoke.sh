#!/usr/bin/env bash
# Runs the installed systemd unit (deploy/systemd/) under a real systemd: PID
# 1 of a podman container built FROM the local Debian base, holding what
# `cmake --install --component server` puts under /usr/local and the
# server's runtime libraries. Checks, in order:
#   1. the shipped flags (device=cuda:all) on a host without a GPU: start
#      fails, systemd retries up to the unit's start limit, then leaves it
#      failed, the journal naming the flag;
#   2. a flag that does not parse: exit 2, not restarted;
#   3. device=cpu, listening on a port and a unix socket: `systemctl start`
#      returns once the server is ready (Type=notify), STATUS= says where
#      it serves;
#   4. the sandbox is in effect: user specverify, no capabilities, no new
#      privileges, / read-only and /home hidden in its mount namespace, a
#      private /tmp, the CUDA cache directory writable;
#   5. a loadgen run as specverify over shared-memory regions (rows written
#      into the loadgen's region): every answer matches the oracle; the same
#      as root is refused, naming the permission (docs/DEPLOY.md: workers
#      that pass regions run as the unit's user); the same worker over the
#      unix socket in /run/specverify (RuntimeDirectory, the user's alone);
#   6. /metrics answers;
#   7. SIGKILL of the server: systemd restarts it;
#   8. systemctl stop under load: drains, exits 0, well within
#      TimeoutStopSec; no answer was wrong;
#   9. prints systemd-analyze security's exposure for the unit.
# The container gets CAP_SYS_ADMIN: without it systemd cannot set up the
# unit's mount namespaces and runs it without ProtectSystem and the rest (it
# does, silently), which would not test the sandbox. No GPU is involved:
# the unit's GPU access (device nodes under ProtectSystem=strict) is not
# covered here.
#
# Not part of CI (the image installs systemd from Debian's archive); run by
# hand after a build (scripts/build.sh):
#   scripts/systemd-smoke.sh
#   BUILD_DIR=build BASE_IMAGE=localhost/debian:bookworm scripts/systemd-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BASE_IMAGE=${BASE_IMAGE:-localhost/debian:bookworm}
IMAGE=${IMAGE:-localhost/specverify:systemd-smoke}
export BUILDAH_ISOLATION=${BUILDAH_ISOLATION:-chroot}

say() { echo "systemd-smoke: $*"; }
fail() { echo "systemd-smoke: FAIL: $*" >&2; exit 1; }

need=()
command -v buildah >/dev/null || need+=(buildah)
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[ -x "$BUILD_DIR/server/specverify-server" ] || fail "no $BUILD_DIR/server/specverify-server (scripts/build.sh builds it)"
if ! podman image exists "$BASE_IMAGE"; then
  [ "$BASE_IMAGE" = localhost/debian:bookworm ] || fail "no image $BASE_IMAGE"
  scripts/container-base.sh
fi

# ---- the image: systemd, the server's runtime libraries, the install ----
context=$(mktemp -d)
name="specverify-systemd-smoke-$$"
cleanup() {
  podman rm -f -t 5 "$name" >/dev/null 2>&1 || true
  rm -rf "$context"
}
[ "${KEEP:-0}" = 1 ] || trap cleanup EXIT
DESTDIR="$context/stage" cmake --install "$BUILD_DIR" --component server >/dev/null
binaries=("$context"/stage/usr/local/bin/*)
# The Debian packages that own the binaries' shared libraries, as the
# Dockerfile's runtime stage finds them.
packages=$(scripts/runtime-packages.sh "${binaries[@]}" | tr '\n' ' ') \
  || fail "the runtime packages of ${binaries[*]}: $packages"
cat > "$context/Containerfile" <<EOF
FROM $BASE_IMAGE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y -qq --no-install-recommends \
      systemd systemd-sysv dbus $packages >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
COPY stage/usr/ /usr/
EOF
say "building $IMAGE (systemd + $packages)"
buildah bud --layers -q -t "$IMAGE" -f "$context/Containerfile" "$context" >/dev/null

# ---- systemd as PID 1 ----
# runc and explicit ulimits: see scripts/container-smoke.sh (this build
# machine's sandbox).
podman run -d --name "$name" --runtime=runc --ulimit=nofile="$(ulimit -Hn)":"$(ulimit -Hn)" \
  --ulimit=nproc=4096:4096 --systemd=always --cap-add=SYS_ADMIN "$IMAGE" /sbin/init >/dev/null
ctr() { podman exec "$name" "$@"; }
for _ in $(seq 100); do
  state=$(ctr systemctl is-system-running 2>/dev/null || true)
  [ "$state" = running ] || [ "$state" = degraded ] && break
  sleep 0.2
done
say "systemd $(ctr systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p') is PID 1 ($state)"
unit=specverify-server
flags=/usr/local/etc/specverify/server.flags
show() { ctr systemctl show "$unit" -p "$1" --value; }
ctr useradd --system --no-create-home --shell /usr/sbin/nologin specverify
ctr systemctl daemon-reload
ctr systemctl enable "$unit" 2>/dev/null

# 1. The shipped flags want every GPU; there is none.
ctr systemctl start "$unit" 2>/dev/null && fail "start succeeded with device=cuda:all and no GPU"
for _ in $(seq 150); do [ "$(show ActiveState)" = failed ] && break; sleep 0.2; done
[ "$(show ActiveState)" = failed ] || fail "still $(show ActiveState) 30 s after a start-up failure"
# (The journal is read whole before grep: grep -q would end the pipe early.)
journal() { ctr journalctl -u "$unit" --no-pager; }
log=$(journal)
grep -q -- '--device=cuda:all: this process sees no GPU' <<<"$log" || fail "the journal does not name the device flag"
grep -q 'Start request repeated too quickly' <<<"$log" || fail "failed without reaching the start limit: $(tail -3 <<<"$log")"
say "ok: device=cuda:all without a GPU: $(grep -c 'start-up failed' <<<"$log") starts, then failed at the start limit, the journal naming --device"
ctr systemctl reset-failed "$unit"

# 2. A flag that does not parse: no restart.
ctr sh -c "echo no_such_flag=1 >> $flags"
ctr systemctl start "$unit" 2>/dev/null && fail "start succeeded with an unknown flag"
sleep 3
[ "$(show ExecMainStatus)" = 2 ] || fail "exit status $(show ExecMainStatus) for an unknown flag, not 2"
[ "$(show NRestarts)" = 0 ] || fail "restarted $(show NRestarts) times on an unknown flag"
say "ok: an unknown flag: exit 2, not restarted ($(show ActiveState))"
ctr sed -i -e '/^no_such_flag=/d' -e 's/^device=.*/device=cpu/' \
  -e 's|^listen_address=.*|listen_address=0.0.0.0:50051,unix:/run/specverify/verifier.sock|' "$flags"
ctr systemctl reset-failed "$unit"

# 3. Type=notify: start returns once the server serves.
ctr systemctl start "$unit"
[ "$(show ActiveState)" = active ] || fail "not active after start: $(show ActiveState)"
status_text=$(show StatusText)
[[ $status_text == "serving on port 50051 and unix:/run/specverify/verifier.sock (backend cpu)" ]] \
  || fail "status text '$status_text'"
ctr /usr/local/bin/specverify-loadgen --address=127.0.0.1:50051 --wait_for_serving=0s --connect_timeout=2s \
  --requests=1 --warmup=0s --concurrency=1 --quiet >/dev/null || fail "not serving right after start returned"
say "ok: start returned ready: '$status_text', answering at once"

# 4. The sandbox.
pid=$(show MainPID)
proc_status=$(ctr cat "/proc/$pid/status")
grep -q "^Uid:.*\b$(ctr id -u specverify)\b" <<<"$proc_status" || fail "not running as specverify"
grep -q '^NoNewPrivs:[[:space:]]*1' <<<"$proc_status" || fail "NoNewPrivs is not set"
grep -q '^CapEff:[[:space:]]*0000000000000000' <<<"$proc_status" || fail "has capabilities"
mounts=$(ctr cat "/proc/$pid/mountinfo" | awk '{print $5, $6}')
grep -q '^/ ro,' <<<"$mounts" || fail "/ is not read-only in the service's namespace (ProtectSystem=strict not in effect)"
grep -q '^/home ro,' <<<"$mounts" || fail "/home is not hidden (ProtectHome)"
grep -q '^/var/cache/specverify rw,' <<<"$mounts" || fail "the cache directory is not writable"
grep -q '^/dev/shm rw,' <<<"$mounts" || fail "/dev/shm is not writable (regions need it)"
[ "$(grep -c '^/tmp ' <<<"$mounts")" -ge 2 ] || fail "no private /tmp"
environment=$(ctr runuser -u specverify -- sh -c "tr '\\0' '\\n' < /proc/$pid/environ")
grep -qx 'CUDA_CACHE_PATH=/var/cache/specverify' <<<"$environment" || fail "CUDA_CACHE_PATH is not the cache directory"
say "ok: sandbox: user specverify, CapEff 0, NoNewPrivs, / read-only, /home hidden, private /tmp, /var/cache/specverify and /dev/shm writable"

# 5. Regions: the worker runs as the unit's user.
loadgen=(/usr/local/bin/specverify-loadgen --address=127.0.0.1:50051 --transport=shm --kv_return=region)
out=$(ctr runuser -u specverify -- "${loadgen[@]}" --concurrency=1,8 --duration=2s --quiet 2>&1) \
  || fail "loadgen as specverify over regions: $out"
grep -q 'verdict: every checked answer matched the oracle' <<<"$out" || fail "loadgen verdict: $out"
say "ok: loadgen as specverify over shm regions: $(grep -o '([0-9]* requests sent to the server, 0 RPC errors)' <<<"$out")"
out=$(ctr "${loadgen[@]}" --concurrency=1 --duration=1s 2>&1) && fail "a root loadgen's region was accepted"
grep -q 'FAILED_PRECONDITION.*shm_open.*Permission denied' <<<"$out" || fail "root's region refused unclearly: $out"
say "ok: a region of another user (root) is refused: $(grep -o 'FAILED_PRECONDITION.*' <<<"$out" | head -1)"
# The same worker over the unix socket in the unit's RuntimeDirectory.
socket_mode=$(ctr stat -c '%U %a' /run/specverify/verifier.sock) || fail "no socket in /run/specverify"
[ "$socket_mode" = "specverify 700" ] || fail "the socket is '$socket_mode', not the specverify user's alone"
out=$(ctr runuser -u specverify -- /usr/local/bin/specverify-loadgen --address=unix:/run/specverify/verifier.sock \
  --transport=shm --kv_return=region --concurrency=1,8 --duration=2s --quiet 2>&1) \
  || fail "loadgen as specverify over the unix socket: $out"
grep -q 'verdict: every checked answer matched the oracle' <<<"$out" || fail "loadgen verdict over the socket: $out"
say "ok: loadgen as specverify over unix:/run/specverify/verifier.sock (owner specverify, mode 700): $(grep -o '([0-9]* requests sent to the server, 0 RPC errors)' <<<"$out")"

# 6. Metrics.
metrics=$(ctr bash -c 'exec 3<>/dev/tcp/127.0.0.1/9401; printf "GET /metrics HTTP/1.0\r\n\r\n" >&3; cat <&3')
grep -q '^specverify_requests_total' <<<"$metrics" || fail "/metrics has no specverify_requests_total"
say "ok: /metrics: $(grep -c '^specverify_' <<<"$metrics") specverify_ samples"

# 7. A crash is restarted.
restarts=$(show NRestarts)
ctr bash -c "kill -KILL $pid"
for _ in $(seq 50); do
  [ "$(show NRestarts)" -gt "$restarts" ] && [ "$(show ActiveState)" = active ] && break
  sleep 0.2
done
if [ "$(show ActiveState)" != active ] || [ "$(show MainPID)" = "$pid" ]; then
  fail "not restarted after SIGKILL ($(show ActiveState))"
fi
say "ok: SIGKILL: restarted (pid $pid -> $(show MainPID))"

# 8. Stop under load: drain, exit 0.
ctr runuser -u specverify -- "${loadgen[@]}" --concurrency=8 --duration=6s --max_error_fraction=1 --quiet \
  >"$context/stop-load.txt" 2>&1 &
load=$!
sleep 2
start=$(date +%s%N)
ctr systemctl stop "$unit"
stop_ms=$(( ($(date +%s%N) - start) / 1000000 ))
wait "$load" || true
if [ "$(show Result)" != success ] || [ "$(show ExecMainStatus)" != 0 ]; then
  fail "stop: result $(show Result), exit $(show ExecMainStatus)"
fi
grep -q 'draining' <<<"$(journal | tail -5)" || fail "the journal shows no drain"
grep -q ' wrong=0 ' "$context/stop-load.txt" || fail "wrong answers during the stop: $(tail -3 "$context/stop-load.txt")"
say "ok: stop under load: drained and exited 0 in ${stop_ms} ms (TimeoutStopSec=30 s); $(grep -o 'ok=[0-9]* rpc_errors=[0-9]* wrong=0' "$context/stop-load.txt")"

# 9. For the record.
say "systemd-analyze security: $(ctr systemd-analyze security "$unit" --no-pager 2>/dev/null | tail -1)"
say "PASS"
