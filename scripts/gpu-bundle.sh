#!/usr/bin/env bash
# Bundles binaries for the lent GPU machine (docs: /work/shared/GPU.md):
# copies each binary into <out-dir>/bin and every shared library ldd resolves
# for it into <out-dir>/lib, except the C/C++ runtime the GPU machine has
# (libc, libm, libstdc++, libgcc_s, the loader, and the CUDA driver libcuda,
# which must come from the machine's own driver).
#
#   scripts/gpu-bundle.sh <build-dir> <out-dir> <binary>...
#
# <binary> is a path relative to <build-dir> (e.g. tests/kernels/greedy_cuda_test)
# or a target name found anywhere under it. Run there with:
#   cd <out-dir> && LD_LIBRARY_PATH=$PWD/lib ./bin/<name>
# Prints the bundle size; fails if a library is missing or the bundle exceeds
# 60 MiB (the run tool carries at most 64 MiB).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 <build-dir> <out-dir> <binary>..." >&2
  exit 2
fi
build_dir=$1
out_dir=$2
shift 2
mkdir -p "$out_dir/bin" "$out_dir/lib"
skip_re='^(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^ ]*|libdl|libpthread|librt|libcuda|linux-vdso)\.so'
for bin in "$@"; do
  path="$build_dir/$bin"
  if [ ! -f "$path" ]; then
    path=$(find "$build_dir" -type f -name "$(basename "$bin")" -perm -u+x | head -1)
  fi
  if [ -z "$path" ] || [ ! -f "$path" ]; then
    echo "gpu-bundle: binary $bin not found under $build_dir" >&2
    exit 1
  fi
  cp -f "$path" "$out_dir/bin/"
  # Symbols stay in the build tree; the bundle must fit the run tool's 64 MiB.
  strip --strip-unneeded "$out_dir/bin/$(basename "$path")"
  if ldd "$path" | grep -q "not found"; then
    echo "gpu-bundle: unresolved libraries for $path:" >&2
    ldd "$path" | grep "not found" >&2
    exit 1
  fi
  ldd "$path" | awk '/=> \// {print $1, $3}' | while read -r name lib; do
    if [[ "$name" =~ $skip_re ]]; then continue; fi
    cp -fL "$lib" "$out_dir/lib/$name"
    strip --strip-unneeded "$out_dir/lib/$name" 2>/dev/null || true
  done
done
size_kb=$(du -sk "$out_dir" | cut -f1)
echo "gpu-bundle: $out_dir: $(ls "$out_dir/bin" | wc -l) binaries, $(ls "$out_dir/lib" | wc -l) libraries, $((size_kb / 1024)) MiB"
if [ "$size_kb" -gt $((60 * 1024)) ]; then
  echo "gpu-bundle: bundle exceeds 60 MiB" >&2
  exit 1
fi
