#!/usr/bin/env bash
# Installs every Debian package that building, testing and running specverify
# needs. Idempotent and non-interactive: installs only what is missing, and
# touches the package lists only then. The CUDA toolkit is not a Debian
# package here; when nvcc is absent the build falls back to the CPU backend.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libcivetweb-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  prometheus   # promtool and a real Prometheus server for the metrics tests
  clang        # -Wthread-safety analysis of the server's locking; the sanitizer build
  libclang-rt-14-dev  # ASan/UBSan/libFuzzer runtimes for scripts/sanitize.sh
  curl         # scraping /metrics in scripts
  python3-yaml # tests/deploy/check_kubernetes.py reads the Kubernetes manifests
  # The Python client (client/python) and its tests, with Debian's /usr/bin/python3;
  # torch (CPU) for the example worker (examples/worker) and torch-tensor inputs.
  python3-grpcio python3-numpy python3-torch
  libopenblas0-pthread  # an optimized BLAS for numpy and torch (the default libblas3 is the slow reference one)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# kubectl renders deploy/kubernetes/kustomization.yaml offline in the deploy
# tests. Debian's is kubernetes-client; another kubectl already on the PATH
# (e.g. a cloud SDK's package, which owns /usr/bin/kubectl too) does the same.
if ! command -v kubectl >/dev/null; then
  missing+=(kubernetes-client)
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
