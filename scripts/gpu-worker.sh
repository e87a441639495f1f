#!/usr/bin/env bash
# The example speculative-decoding worker (issue #18) and the Python client's
# GPU tests (issue #13 item 3) on the GPU machine, in one command.
#
# On the build machine (packs the server with its libraries, the Python
# package with its generated stubs, and -- only used if the GPU machine's
# python lacks protobuf -- Debian's pure-Python protobuf):
#
#   scripts/gpu-worker.sh pack build .gpu-worker     # build: a CUDA build (nvcc found)
#
# On the GPU machine (python3 there has torch with CUDA and grpcio):
#
#   run(carry=[".gpu-worker"]): scripts/gpu-worker.sh run .gpu-worker $OUT/worker
#
# What "run" does, writing everything under <out>:
#   1. tests/client/python against the bundled server: test_cuda_regions
#      (torch CUDA tensors as CUDA regions, --device=cuda:0 server),
#      test_shm_regions and test_client (CPU server) -> tests.log;
#   2. the worker with models on the GPU against a --device=cuda:0 server,
#      trained there (preset "full"):
#      a. float64: greedy lossless check (4 prompts x gamma 2,4,8, 96 tokens)
#         and the sampled first-token chi-square (2000 runs), CUDA regions;
#      b. float32 benchmark, CUDA regions and inline: acceptance, tokens/s
#         with and without speculation, draft / target / verify time;
#   3. the same models on the CPU (16 cores) against a --device=cpu server,
#      shared memory and inline: the CPU benchmark.
#   -> worker.md (the tables for docs/PERFORMANCE.md), *.json, *.log.
# Environment: TOKENS (bench tokens per prompt, default 128), SKIP_TESTS=1,
# PRESET (default full), NO_GPU=1 (skips everything that needs a GPU and
# trains on the CPU: to try the script on a machine without one, with
# PRESET=ci).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = pack ]; then
  if [ $# -ne 3 ]; then echo "usage: $0 pack <build-dir> <bundle-dir>" >&2; exit 2; fi
  build=$2
  bundle=$3
  cmake --build "$build" --target specverify-server specverify_python || exit 1
  "$here/scripts/gpu-bundle.sh" "$build" "$bundle" server/specverify-server || exit 1
  rm -rf "$bundle/python" "$bundle/pyfallback"
  cp -r "$build/client/python" "$bundle/python"
  rm -rf "$bundle/python/CMakeFiles" "$bundle/python"/*.cmake "$bundle/python/Makefile"
  mkdir -p "$bundle/pyfallback/google"
  cp -r /usr/lib/python3/dist-packages/google/protobuf "$bundle/pyfallback/google/"
  rm -rf "$bundle/pyfallback/google/protobuf/pyext" # CPython 3.11 binaries; the fallback is pure Python
  find "$bundle" -name __pycache__ -prune -exec rm -rf {} +
  echo "gpu-worker: packed $(du -sh "$bundle" | cut -f1) into $bundle"
  exit 0
fi

if [ "${1:-}" != run ] || [ $# -ne 3 ]; then
  echo "usage: $0 pack <build-dir> <bundle-dir> | $0 run <bundle-dir> <out-dir>" >&2
  exit 2
fi
bundle=$(cd "$2" && pwd)
out=$(mkdir -p "$3" && cd "$3" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$bundle/python
export PYTHONDONTWRITEBYTECODE=1
export SPECVERIFY_SERVER=$bundle/bin/specverify-server
export SPECVERIFY_WORKER_CACHE=${SPECVERIFY_WORKER_CACHE:-/tmp/specverify-worker-cache}
py=${PYTHON:-python3}
tokens=${TOKENS:-128}
preset=${PRESET:-full}
no_gpu=${NO_GPU:-0}
status=0

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  nproc
} | tee "$out/machine.txt"
# The stubs come from protoc 3.21: use the machine's protobuf if it takes
# them, else the bundled pure-Python protobuf of the same version.
if ! "$py" -c 'from specverify.v1 import verifier_pb2, verifier_pb2_grpc' > "$out/protobuf-check.log" 2>&1; then
  echo "python's protobuf does not load the stubs (protobuf-check.log): using the bundled pure-Python protobuf 3.21" | tee -a "$out/machine.txt"
  export PYTHONPATH=$PYTHONPATH:$bundle/pyfallback
  export PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python
fi
"$py" -c 'import sys, grpc, torch, numpy, google.protobuf as pb
print("python", sys.version.split()[0], "grpcio", grpc.__version__, "protobuf", pb.__version__,
      "torch", torch.__version__, "cuda", torch.cuda.is_available(), "numpy", numpy.__version__)' \
  2>&1 | tee -a "$out/machine.txt"

# ---- 1. the Python client's tests ---------------------------------------------
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  modules="test_cuda_regions test_shm_regions test_client"
  [ "$no_gpu" = 1 ] && modules="test_shm_regions test_client"
  for module in $modules; do
    (cd "$here/tests/client/python" && "$py" run_tests.py "$module") >> "$out/tests.log" 2>&1
    rc=$?
    case $rc in
      0) echo "PASS $module" ;;
      77) echo "SKIPPED $module (every test skipped: see tests.log)"; status=1 ;;
      *) echo "FAIL $module"; status=1 ;;
    esac
  done | tee "$out/tests.txt"
  grep -q -v '^PASS' "$out/tests.txt" && status=1
  grep -E "^(test_|Ran|OK|FAILED)|skipped" "$out/tests.log" | tail -40
fi

# ---- 2. the worker on the GPU ------------------------------------------------
worker() {  # tag args...
  local tag=$1
  shift
  if "$py" "$here/examples/worker/worker.py" --json "$out/$tag.json" "$@" > "$out/$tag.log" 2>&1; then
    echo "PASS worker $tag"
  else
    echo "FAIL worker $tag"; status=1
  fi
  grep -E "^(greedy|sampled|bench|target:|draft:|server|worker:)" "$out/$tag.log" | tail -30
}
gpu_server=(--server "$SPECVERIFY_SERVER" --server-flag=--device=cuda:0)
train_device=cuda
if [ "$no_gpu" != 1 ]; then
  worker gpu-check "${gpu_server[@]}" --preset "$preset" --device cuda --dtype float64 \
    --transport cuda --check-greedy --gamma 2,4,8 --tokens 96 \
    --check-sampled 2000 --sampled-prompt "the "
  for transport in cuda inline; do
    worker "gpu-bench-$transport" "${gpu_server[@]}" --preset "$preset" --device cuda \
      --dtype float32 --transport "$transport" --bench --gamma 2,4,8 --tokens "$tokens" \
      --markdown "$out/gpu-bench-$transport.md"
  done
else
  train_device=cpu
fi

# ---- 3. the same models on the CPU -------------------------------------------
cpu_server=(--server "$SPECVERIFY_SERVER" --server-flag=--device=cpu --server-flag=--cpu_threads=4)
for transport in shm inline; do
  worker "cpu-bench-$transport" "${cpu_server[@]}" --preset "$preset" --train-device "$train_device" --device cpu \
    --dtype float32 --threads 8 --transport "$transport" --bench --gamma 2,4,8 \
    --tokens $((tokens / 2)) --markdown "$out/cpu-bench-$transport.md"
done

{
  echo "## Example worker ($(head -1 "$out/machine.txt"))"
  echo
  sed -n 2,99p "$out/machine.txt"
  echo
  for f in gpu-bench-cuda gpu-bench-inline cpu-bench-shm cpu-bench-inline; do
    [ -f "$out/$f.md" ] || continue
    echo "### $f"
    echo
    cat "$out/$f.md"
    echo
  done
  echo "### checks"
  echo
  grep -hE "^(greedy|sampled)" "$out"/gpu-*.log 2> /dev/null
} > "$out/worker.md"
echo "gpu-worker: $( [ $status = 0 ] && echo "all passed" || echo "SOMETHING FAILED" ); report in $out/worker.md"
exit $status
