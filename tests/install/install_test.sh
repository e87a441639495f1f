#!/usr/bin/env bash
# `cmake --install` as a worker's build uses it (cmake/SpecverifyInstall.cmake):
#   1. installs the build tree into a fresh prefix;
#   2. builds tests/install/consumer against that prefix alone, twice:
#      with CMake (find_package(specverify) + specverify::client) and with
#      the compiler and pkg-config only (specverify.pc, and specverify-cuda.pc
#      where the tree was built with CUDA);
#   3. checks the installed systemd unit (systemd-analyze verify, where
#      systemd's tools are installed) and starts the installed server with
#      the unit's own ExecStart line and flags file, overriding only the
#      device (CPU backend) and the addresses (loopback, a free port);
#   4. runs both consumers against it: one greedy request each, checked
#      against the rule;
#   5. imports the installed Python package (from the prefix, not the build
#      tree) with Debian's python3 and sends the same request through it.
# Every process it starts dies with it; the prefix is removed afterwards.
#
#   tests/install/install_test.sh <build-dir> <python-dir> <generator> <c++ compiler>
set -uo pipefail
if [ $# -ne 4 ]; then
  echo "usage: $0 <build-dir> <python-dir (relative to the prefix)> <cmake generator> <c++ compiler>" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
python_dir=$2
generator=$3
cxx=$4
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d -t specverify-install.XXXXXX)
prefix=$work/prefix
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }

echo "install_test: cmake --install $build_dir --prefix $prefix"
cmake --install "$build_dir" --prefix "$prefix" > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
for f in bin/specverify-server bin/specverify-loadgen include/client/verifier_client.h \
         include/specverify/v1/verifier.grpc.pb.h share/specverify/proto/specverify/v1/verifier.proto \
         "$python_dir/specverify/__init__.py" "$python_dir/specverify/v1/verifier_pb2_grpc.py"; do
  [ -e "$prefix/$f" ] || fail "the prefix has no $f"
done
# The package files sit under the library folder GNUInstallDirs chose (lib,
# lib64, lib/<multiarch>).
for f in specverifyConfig.cmake specverifyConfigVersion.cmake specverifyTargets.cmake; do
  [ -n "$(find "$prefix" -path "*/cmake/specverify/$f")" ] || fail "the prefix has no cmake/specverify/$f"
done

echo "install_test: building the consumer against the prefix"
start=$(date +%s)
cmake -S "$here/consumer" -B "$work/consumer" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer-configure.log" 2>&1 \
  || { cat "$work/consumer-configure.log"; fail "configuring the consumer (find_package(specverify))"; }
cmake --build "$work/consumer" > "$work/consumer-build.log" 2>&1 \
  || { cat "$work/consumer-build.log"; fail "building the consumer"; }
echo "install_test: consumer built in $(( $(date +%s) - start )) s"

# The same consumer through pkg-config: the .pc files name every library in
# link order and the Debian modules they need.
pc_dir=$(dirname "$(find "$prefix" -path "*/pkgconfig/specverify.pc" | head -1)")
[ -f "$pc_dir/specverify.pc" ] || fail "the prefix has no pkgconfig/specverify.pc"
pc_modules=specverify
pc_defines=()
if [ -f "$pc_dir/specverify-cuda.pc" ]; then
  pc_modules="specverify-cuda specverify"
  pc_defines=(-DCONSUMER_HAS_CLIENT_CUDA=1)
fi
pc_flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs $pc_modules) \
  || fail "pkg-config --cflags --libs $pc_modules"
case "$pc_flags" in
  *"$prefix"*) ;;
  *) fail "pkg-config's flags do not point into the prefix: $pc_flags" ;;
esac
start=$(date +%s)
"$cxx" -std=c++20 "${pc_defines[@]}" -o "$work/consumer-pkg-config" "$here/consumer/consumer.cc" $pc_flags \
  > "$work/consumer-pkg-config.log" 2>&1 \
  || { cat "$work/consumer-pkg-config.log"; fail "building the consumer with pkg-config ($pc_modules)"; }
echo "install_test: consumer built with pkg-config ($pc_modules) in $(( $(date +%s) - start )) s"

# The systemd unit names the installed server and flags file by their paths
# in this prefix (written at install time).
unit="$prefix/lib/systemd/system/specverify-server.service"
[ -f "$unit" ] || fail "the prefix has no lib/systemd/system/specverify-server.service"
[ -f "$prefix/etc/specverify/server.flags" ] || fail "the prefix has no etc/specverify/server.flags"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[ "$exec_start" = "$prefix/bin/specverify-server --config_file=$prefix/etc/specverify/server.flags" ] \
  || fail "the unit's ExecStart is not the installed server with the installed flags: $exec_start"
# Settings that close the unit's device policy would deny the GPUs' device
# nodes (ProtectClock implies DeviceAllow=char-rtc r; PrivateDevices hides
# /dev): a GPU host's server would fail to start.
if grep -Eq '^(ProtectClock|PrivateDevices|DeviceAllow|DevicePolicy)=' "$unit"; then
  fail "the unit closes its device policy: $(grep -E '^(ProtectClock|PrivateDevices|DeviceAllow|DevicePolicy)=' "$unit")"
fi
if command -v systemd-analyze > /dev/null; then
  # verify exits 0 on warnings it only prints: any output fails.
  verify_output=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $verify_output"
  [ -z "$verify_output" ] || fail "systemd-analyze verify: $verify_output"
  echo "install_test: systemd-analyze verify: the unit is clean"
else
  echo "install_test: no systemd-analyze here: the unit's syntax is not checked"
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
read -ra unit_command <<< "$exec_start"
# --pdeathsig: the server dies with this script even when it is SIGKILLed
# (a CTest timeout), where the EXIT trap cannot run. The flags after the
# unit's --config_file override the file's device and addresses.
setpriv --pdeathsig KILL "${unit_command[@]}" --device=cpu --listen_address=127.0.0.1:$port --metrics_address= \
  > "$work/server.stdout" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 1 200); do
  grep -q "listening on port" "$work/server.stdout" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; fail "the installed server exited"; }
  sleep 0.05
done
grep -q "listening on port" "$work/server.stdout" || fail "the installed server did not listen within 10 s"

timeout 60 "$work/consumer/consumer" 127.0.0.1:$port || fail "the consumer's request"
timeout 60 "$work/consumer-pkg-config" 127.0.0.1:$port || fail "the pkg-config consumer's request"

PYTHONPATH="$prefix/$python_dir" timeout 60 /usr/bin/python3 - "$prefix" "127.0.0.1:$port" <<'PY' || fail "the installed Python package"
import os
import sys

import specverify

prefix, address = sys.argv[1], sys.argv[2]
if not os.path.realpath(specverify.__file__).startswith(os.path.realpath(prefix)):
    sys.exit(f"specverify imported from {specverify.__file__}, not from the prefix")
with specverify.Verifier(address) as v:
    v.wait_until_serving()
    r = v.verify_greedy([5, 7, 9], [5, 7, 2, 4])
    if (r[0].accepted_length, r[0].next_token) != (2, 2):
        sys.exit(f"expected k=2 next=2, got {r[0].accepted_length} {r[0].next_token}")
print(f"install_test: python: specverify from {os.path.dirname(specverify.__file__)} answered k=2 next=2")
PY

kill -TERM "$server_pid"
wait "$server_pid" || fail "the installed server did not exit 0 on SIGTERM"
server_pid=""
echo "install_test: PASS"
