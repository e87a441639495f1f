#!/usr/bin/env bash
# ThreadSanitizer build (issue #15, item 13): the server's CPU suites under
# TSan. Not run by CI (it builds abseil first and is slow on 2 cores).
#
# absl::Mutex is only visible to TSan when abseil itself is built with
# -fsanitize=thread (its lock/unlock carry TSan annotations compiled in only
# then), and Debian's libabsl20220623 is not. So this script
#   1. fetches Debian's own abseil source package (the installed version,
#      20220623.1-1+deb12u2, with Debian's patches: same SONAMEs, same
#      inline namespace, same options, so it is ABI-identical to the system
#      library) through apt-get with a private deb-src list (the system's
#      apt configuration is not touched),
#   2. builds it shared with clang and -fsanitize=thread into a prefix,
#   3. builds the project's CPU test targets with clang and -fsanitize=thread
#      against that prefix, and
#   4. runs them with LD_LIBRARY_PATH pointing at the prefix, so that the
#      project *and* Debian's gRPC load the instrumented abseil.
# gRPC and protobuf stay uninstrumented (their own memory accesses are
# invisible; synchronization they do through absl::Mutex or pthreads is
# seen, through their lock-free internals is not), which is why
# tests/tsan/suppressions.txt exists: each entry says why.
#
#   scripts/tsan.sh                                # deps, build, the default suites
#   TARGETS=batcher_test scripts/tsan.sh --gtest_filter='*RoundRobin*'
#                                                  # extra arguments go to each suite
#
# Environment: BUILD_DIR (build-tsan), DEPS_DIR (build-tsan-deps: apt
# lists, abseil source, build and prefix), JOBS (default 2), TARGETS (the
# CMake targets to build; default the server's concurrent suites),
# ABSEIL_VERSION (default the installed libabsl-dev's).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build-tsan}
DEPS_DIR=${DEPS_DIR:-build-tsan-deps}
JOBS=${JOBS:-2}
TARGETS=${TARGETS:-batcher_test kv_arena_test extent_allocator_test cpu_backend_test \
client_limits_test server_integration_test server_hardening_test sampled_server_test \
tls_reload_test}
ABSEIL_VERSION=${ABSEIL_VERSION:-$(dpkg-query -W -f='${Version}' libabsl-dev 2>/dev/null || true)}
[ -n "$ABSEIL_VERSION" ] || { echo "tsan: libabsl-dev is not installed (scripts/install-deps.sh)" >&2; exit 2; }
for tool in clang clang++ dpkg-source apt-get cmake ninja; do
  command -v "$tool" > /dev/null || { echo "tsan: $tool not found" >&2; exit 2; }
done
mkdir -p "$DEPS_DIR"
DEPS=$(cd "$DEPS_DIR" && pwd)
PREFIX=$DEPS/prefix
TSAN_FLAGS="-fsanitize=thread -fno-omit-frame-pointer -g"

# 1. Debian's abseil source, via a private deb-src list.
if [ ! -d "$DEPS/src" ]; then
  mkdir -p "$DEPS/apt/lists/partial" "$DEPS/apt/cache/archives/partial"
  cat > "$DEPS/apt/sources.list" <<'EOF'
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian bookworm-updates main
deb-src http://deb.debian.org/debian-security bookworm-security main
EOF
  apt_options=(-o "Dir::Etc::SourceList=$DEPS/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
               -o "Dir::State::Lists=$DEPS/apt/lists" -o "Dir::Cache=$DEPS/apt/cache")
  echo "tsan: fetching Debian's abseil $ABSEIL_VERSION source"
  apt-get "${apt_options[@]}" update > "$DEPS/apt-update.log" 2>&1
  (cd "$DEPS" && apt-get "${apt_options[@]}" source --download-only "abseil=$ABSEIL_VERSION" \
      > apt-source.log 2>&1)
  # Debian's patches applied (SONAME, inline namespace, options).
  (cd "$DEPS" && dpkg-source --no-check -x abseil_*.dsc src > dpkg-source.log 2>&1)
fi

# 2. abseil, shared, instrumented, as Debian configures it (C++17, the
# package's options) but without its tests.
if [ ! -f "$PREFIX/lib/cmake/absl/abslConfig.cmake" ]; then
  echo "tsan: building abseil with -fsanitize=thread into $PREFIX (-j$JOBS)"
  cmake -S "$DEPS/src" -B "$DEPS/absl-build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_STANDARD=17 \
      -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF -DABSL_PROPAGATE_CXX_STD=ON \
      -DCMAKE_C_FLAGS="$TSAN_FLAGS" -DCMAKE_CXX_FLAGS="$TSAN_FLAGS" \
      -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
      -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR=lib > "$DEPS/absl-configure.log"
  cmake --build "$DEPS/absl-build" -j "$JOBS"
  cmake --install "$DEPS/absl-build" > "$DEPS/absl-install.log"
fi

# 2b. The point of it, checked: a value handed from one thread to another
# only through absl::Mutex must not be reported (it is with Debian's
# uninstrumented abseil: TSan cannot see the Mutex), and the same value
# handed over with no synchronization must be (TSan is on).
cat > "$DEPS/mutex_probe.cc" <<'EOF'
#include <thread>
#include "absl/synchronization/mutex.h"
int main(int argc, char**) {
  absl::Mutex mu;
  int x = 0;
  bool ready = false;
  const bool locked = argc == 1;  // any argument: no synchronization at all
  std::thread t([&] {
    x = 42;
    if (locked) {
      absl::MutexLock l(&mu);
      ready = true;
    }
  });
  if (locked) {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(&ready));
  }
  const int y = x;
  t.join();
  return y == 42 || !locked ? 0 : 1;
}
EOF
clang++ -std=c++17 $TSAN_FLAGS "$DEPS/mutex_probe.cc" -I"$PREFIX/include" -L"$PREFIX/lib" \
    -labsl_synchronization -labsl_base -labsl_raw_logging_internal -labsl_time \
    -Wl,-rpath,"$PREFIX/lib" -o "$DEPS/mutex_probe"
if ! TSAN_OPTIONS=halt_on_error=1:exitcode=66:suppressions=$ROOT/tests/tsan/suppressions.txt LD_LIBRARY_PATH="$PREFIX/lib" "$DEPS/mutex_probe" \
    > "$DEPS/mutex_probe.log" 2>&1; then
  echo "tsan: the instrumented abseil's Mutex is not seen by TSan:" >&2
  cat "$DEPS/mutex_probe.log" >&2
  exit 1
fi
if TSAN_OPTIONS=halt_on_error=1:exitcode=66:suppressions=$ROOT/tests/tsan/suppressions.txt LD_LIBRARY_PATH="$PREFIX/lib" "$DEPS/mutex_probe" racy \
    > "$DEPS/mutex_probe_racy.log" 2>&1; then
  echo "tsan: an unsynchronized hand-off was not reported: TSan is not active" >&2
  exit 1
fi
echo "tsan: probe: an absl::Mutex hand-off is not reported, an unsynchronized one is"

# 3. The project, instrumented, against that abseil (found first through
# CMAKE_PREFIX_PATH; Debian's gRPC config then resolves absl to it too).
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSPECVERIFY_ENABLE_CUDA=OFF \
    -DSPECVERIFY_BUILD_BENCHMARKS=OFF -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_C_FLAGS="$TSAN_FLAGS" -DCMAKE_CXX_FLAGS="$TSAN_FLAGS" \
    -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
    > "$DEPS/project-configure.log"
grep -q "absl_DIR:PATH=$PREFIX" "$BUILD_DIR/CMakeCache.txt" || {
  echo "tsan: CMake did not pick the instrumented abseil:" >&2
  grep "absl_DIR" "$BUILD_DIR/CMakeCache.txt" >&2
  exit 1
}
# shellcheck disable=SC2086  # TARGETS is a list
cmake --build "$BUILD_DIR" -j "$JOBS" --target $TARGETS

# 4. Run each suite's executable directly (one process per suite, not one
# per test case as ctest would: TSan start-up is not free). Every abseil the
# process loads (the project's and gRPC's) is the instrumented one; a report
# aborts the suite that hit it.
export LD_LIBRARY_PATH="$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# ignore_noninstrumented_modules: memcpy, recvmsg and the like called from
# gRPC or protobuf (not instrumented) record no accesses: their callers'
# synchronization is invisible, so every such report would be noise.
# Synchronization through pthreads and the instrumented abseil still counts.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:history_size=4:ignore_noninstrumented_modules=1:suppressions=$ROOT/tests/tsan/suppressions.txt}
LOGS=$DEPS/logs
mkdir -p "$LOGS"
failed=()
for target in $TARGETS; do
  exe=$(find "$BUILD_DIR" -name "$target" -type f -perm -u+x | head -n 1)
  [ -n "$exe" ] || { echo "tsan: no executable for $target" >&2; failed+=("$target"); continue; }
  # The instrumented abseil really is the one loaded (not Debian's).
  # (ldd's output captured first: grep -q quitting early would fail the
  # pipeline under pipefail.)
  libs=$(ldd "$exe")
  if ! grep -q "$PREFIX/lib/libabsl_synchronization" <<< "$libs"; then
    echo "tsan: $exe does not load $PREFIX/lib/libabsl_synchronization" >&2
    exit 1
  fi
  start=$SECONDS
  if timeout 1800 "$exe" "$@" > "$LOGS/$target.log" 2>&1; then
    echo "tsan: PASS $target ($((SECONDS - start)) s)"
  else
    echo "tsan: FAIL $target ($((SECONDS - start)) s): $LOGS/$target.log"
    grep -m1 -A12 "WARNING: ThreadSanitizer" "$LOGS/$target.log" || tail -5 "$LOGS/$target.log"
    failed+=("$target")
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "tsan: failed: ${failed[*]}"; exit 1; }
echo "tsan: every suite passed under ThreadSanitizer"
