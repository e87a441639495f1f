#!/usr/bin/env bash
# Concurrency-1 latency on the GPU machine (issue #12): where a verify round
# trip goes, against the raw-gRPC ceiling (VerifyCeiling) measured in the
# same run on the same connection, for server configurations side by side.
# Each configuration starts a server, runs specverify-latency-breakdown with
# KV none, inline and handle (greedy, gamma=8, 4 sequences per request,
# 4 KiB rows; every answer checked), and stops it. Prints one table per run
# and writes <out>/latency.md plus each run's JSON.
#
#   scripts/gpu-bundle.sh build .gpu-lat specverify-server specverify-latency-breakdown
#   run(carry=[".gpu-lat"]): scripts/gpu-latency.sh .gpu-lat $OUT
#
# Environment: REQUESTS (pairs per run, default 2000), CONFIGS (a
# ';'-separated list of "name:server flags", default below; flags starting
# with "@binary " run that binary of the bundle's bin/ instead of
# specverify-server, for A/B runs of two builds), KVS (default
# "none inline handle").
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 <bundle-dir> <out-dir>" >&2
  exit 2
fi
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
requests=${REQUESTS:-2000}
configs=${CONFIGS:-"gpu:--device=cuda:0;gpu-mapped64k:--device=cuda:0 --cuda_mapped_inputs_max_bytes=65536;gpu-window64k:--device=cuda:0 --grpc_args=grpc.http2.lookahead_bytes=65535;cpu:--device=cpu;noop:--device=noop"}
status=0
port=50300

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/machine.txt" 2>&1
{
  echo "| config | kv | raw p50 | verify p50 | added p50 | verify p99 | queue p50 | submit p50 | complete p50 | server p50 | device p50 |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} > "$out/latency.md"

IFS=';' read -ra entries <<< "$configs"
for entry in "${entries[@]}"; do
  name=${entry%%:*}
  flags=${entry#*:}
  server=specverify-server
  if [ "${flags:0:1}" = "@" ]; then
    server=${flags%% *}
    server=${server#@}
    flags=${flags#* }
  fi
  port=$((port + 1))
  # shellcheck disable=SC2086
  "$bin/$server" $flags --listen_address=127.0.0.1:$port --metrics_address= \
      > "$out/server-$name.stdout" 2> "$out/server-$name.log" &
  pid=$!
  for _ in $(seq 1 200); do
    grep -q "listening on port" "$out/server-$name.stdout" 2>/dev/null && break
    sleep 0.05
  done
  for kv in ${KVS:-none inline handle}; do
    "$bin/specverify-latency-breakdown" --address=127.0.0.1:$port --kv_return=$kv \
        --requests="$requests" --label="$name" --json="$out/$name-$kv.json" \
        > "$out/$name-$kv.txt" 2>&1 || status=1
    cat "$out/$name-$kv.txt"
    python3 - "$out/$name-$kv.json" "$name" "$kv" >> "$out/latency.md" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["series"]
us = lambda k, q="p50_ns": f'{s[k][q] / 1e3:.1f}'
print(f'| {sys.argv[2]} | {sys.argv[3]} | {us("raw gRPC round trip (VerifyCeiling)")} | '
      f'{us("verify round trip")} | {d["added_p50_ns"] / 1e3:.1f} | '
      f'{us("verify round trip", "p99_ns")} | {us("server queue")} | {us("server submit")} | '
      f'{us("server complete")} | {us("server total")} | {us("device (batch)")} |')
PY
  done
  kill -TERM "$pid"
  wait "$pid" || { echo "server $name exited non-zero"; status=1; }
done
cat "$out/latency.md"
exit $status
