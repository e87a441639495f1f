#!/usr/bin/env bash
# On a GPU machine without systemd as PID 1 (the lent ones are containers):
# runs the CUDA server inside what the systemd unit (deploy/systemd/) would
# give it, as far as util-linux can build it, and drives it with loadgens,
# to see whether that sandbox leaves the NVIDIA driver what it needs:
#   * user specverify (created here), no new privileges, an empty capability
#     bounding set, no inheritable or ambient capabilities, umask 0077;
#   * its own mount namespace: / read-only (ProtectSystem=strict), /home
#     hidden (ProtectHome), a private /tmp (PrivateTmp), /proc/sys and /sys
#     read-only (ProtectKernelTunables), the CUDA cache directory writable
#     and CUDA_CACHE_PATH pointing at it (CacheDirectory), /dev and /dev/shm
#     as they are (no PrivateDevices/DeviceAllow);
# then greedy and sampled loadgens over TCP, shared-memory regions and CUDA
# IPC regions (the loadgen as specverify too: regions are 0600), every
# answer checked against the oracle. Not built here: the unit's seccomp
# filters (RestrictAddressFamilies, RestrictNamespaces, RestrictRealtime,
# LockPersonality, SystemCallArchitectures) and ProtectKernelModules; those
# need systemd itself (scripts/systemd-smoke.sh runs them, without a GPU).
#
# From a bundle (scripts/gpu-bundle.sh build-gpu .gpu-pack specverify-server
# specverify-loadgen), as root on the GPU machine:
#   cd .gpu-pack && LD_LIBRARY_PATH=$PWD/lib ../scripts/gpu-sandbox-check.sh bin $OUT
set -euo pipefail
# DEVICE=cpu tries the sandbox on a machine without a GPU (no CUDA regions).
device=${DEVICE:-cuda:all}
bin=$(realpath "${1:?usage: $0 <bin-dir> <out-dir>}")
out=$(realpath "${2:?usage: $0 <bin-dir> <out-dir>}")
lib=${LD_LIBRARY_PATH%%:*}
[ -z "$lib" ] || lib=$(realpath "$lib")
say() { echo "gpu-sandbox-check: $*"; }
fail() { echo "gpu-sandbox-check: FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (it makes a user and a mount namespace)"
say "PID 1 is $(cat /proc/1/comm); systemd running: $([ -d /run/systemd/system ] && echo yes || echo no)"
say "device nodes: $(stat -c '%n %a' /dev/nvidia* 2>/dev/null | tr '\n' ' ')"
id specverify >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin specverify
cache=/var/cache/specverify
mkdir -p "$cache" && chown specverify:specverify "$cache" && chmod 0700 "$cache"
# Installed where an install would put them (the bundle may sit under /tmp,
# which the sandbox replaces), readable by specverify.
prefix=/opt/specverify-sandbox-check
rm -rf "$prefix" && mkdir -p "$prefix/lib"
cp -r "$bin" "$prefix/bin"
[ -z "$lib" ] || cp -r "$lib/." "$prefix/lib/"
chmod -R a+rX "$prefix"
bin=$prefix/bin
lib=$prefix/lib
as_user=(setpriv --reuid=specverify --regid=specverify --init-groups --no-new-privs
  --bounding-set=-all --inh-caps=-all)

# The server, sandboxed. The inner shell makes the mounts, then drops to the
# user; its stdout and stderr were opened before, into $out.
port=50071
log="$out/sandboxed-server.log"
unshare --mount --propagation private -- sh -c "
  set -e
  mount --bind '$cache' '$cache'
  mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys
  mount -o remount,bind,ro /sys 2>/dev/null || true
  mount -o remount,bind,ro /
  mount -t tmpfs -o ro,mode=0755 tmpfs /home
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  umask 0077
  export CUDA_CACHE_PATH='$cache' LD_LIBRARY_PATH='$lib'
  exec ${as_user[*]} -- '$bin/specverify-server' --device=$device --listen_address=127.0.0.1:$port \
    --metrics_address=127.0.0.1:9471 --drain_timeout_ms=10000
" >"$out/sandboxed-server.stdout" 2>"$log" &
server=$!
trap 'kill -TERM $server 2>/dev/null || true' EXIT
for _ in $(seq 300); do
  grep -q 'listening on port' "$out/sandboxed-server.stdout" 2>/dev/null && break
  kill -0 "$server" 2>/dev/null || fail "the sandboxed server exited: $(cat "$log")"
  sleep 0.1
done
grep -q 'listening on port' "$out/sandboxed-server.stdout" || fail "not listening after 30 s: $(cat "$log")"
say "server: $(head -1 "$log")"
pid=$server  # unshare, sh and setpriv each exec the next
say "as $(stat -c %U /proc/"$pid") with: $(grep -E '^(NoNewPrivs|CapEff|CapBnd)' /proc/"$pid"/status | tr -s '\t\n' '  ')"
mounts=$(awk '{print $5, $6}' /proc/"$pid"/mountinfo)
for expected in '^/ ro,' '^/home ro,' "^$cache rw," '^/proc/sys ro,' '^/dev/shm rw,'; do
  grep -q "$expected" <<<"$mounts" || fail "the server's namespace lacks '$expected': $mounts"
done
say "its namespace: / ro, /home hidden, private /tmp, /proc/sys ro, $cache and /dev/shm rw"

run_loadgen() {
  local name=$1
  shift
  if "${as_user[@]}" -- env LD_LIBRARY_PATH="$lib" "$bin/specverify-loadgen" --address=127.0.0.1:$port \
    --concurrency=1,8 --duration=2s "$@" >"$out/$name.txt" 2>&1 &&
    grep -q 'verdict: every checked answer matched the oracle' "$out/$name.txt"; then
    say "ok: $name: $(grep -o '([0-9]* requests sent to the server, [0-9]* RPC errors)' "$out/$name.txt")"
  else
    fail "$name: $(tail -5 "$out/$name.txt")"
  fi
}
run_loadgen greedy-tcp --kv_return=inline
run_loadgen sampled-tcp --mode=sampled --kind=logits --kv_return=none --pool_requests=16
run_loadgen greedy-shm-regions --transport=shm --kv_return=region
[ "$device" = cpu ] || run_loadgen sampled-cuda-regions --mode=sampled --transport=cuda --kind=probs --kv_return=region --pool_requests=16
say "JIT cache: $(find "$cache" -type f | wc -l) files in $cache"

kill -TERM "$server"
wait "$server" && code=0 || code=$?
[ "$code" = 0 ] || fail "the server exited $code on SIGTERM: $(tail -3 "$log")"
trap - EXIT
say "SIGTERM: drained, exit 0"
say "PASS"
