# specverify server image: one file, two variants (docs/DEPLOY.md).
#
# CPU (the default): build and runtime stages both FROM a Debian bookworm
# image, the distribution the project is developed and tested on.
#   buildah bud --format docker -t specverify:cpu .       # or: docker build -t specverify:cpu .
#   scripts/container-build.sh                             # here: FROM a local mmdebstrap base
#
# CUDA: the build stage FROM NVIDIA's CUDA *devel* image (nvcc and the toolkit),
# the runtime stage FROM NVIDIA's CUDA *base* image (no toolkit; the CUDA
# runtime is linked statically, and the NVIDIA container toolkit mounts the
# driver). NVIDIA publishes no Debian images, so this variant builds on
# Ubuntu 24.04, whose archive has the same library generation as bookworm
# (gRPC 1.51, protobuf 3.21, abseil 20220623). Not built or run by this
# project's CI or on its build machine (no image registry is reachable there).
#   docker build -t specverify:cuda \
#     --build-arg BUILD_IMAGE=docker.io/nvidia/cuda:13.0.0-devel-ubuntu24.04 \
#     --build-arg BASE_IMAGE=docker.io/nvidia/cuda:13.0.0-base-ubuntu24.04 \
#     --build-arg ENABLE_CUDA=ON .
#
# Run: docker run --gpus all -p 50051:50051 -p 9401:9401 specverify:cuda
# (flags after the image name replace CMD; every flag is in docs/SERVER.md).

# The runtime stage's base image, and the build stage's (by default the same).
ARG BASE_IMAGE=docker.io/library/debian:bookworm-slim
ARG BUILD_IMAGE=${BASE_IMAGE}

# --- build stage: compile the server and the load generator (CMake + Ninja).
FROM ${BUILD_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
# Only what compiling needs (scripts/install-deps.sh also installs the test,
# sanitizer and benchmark tools, which an image does not use).
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev prometheus-cpp-dev libcivetweb-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# ON for the CUDA variant: then the build fails unless nvcc is found, instead
# of quietly producing a CPU-only server.
ARG ENABLE_CUDA=OFF
ARG CUDA_ARCHITECTURES=90-real;80-real;75-virtual
# Parallel compile jobs (empty: every core). Each job takes ~1 GiB.
ARG JOBS=
# The build context has no .git; cmake/WriteGitCommit.cmake stamps this
# instead (scripts/container-build.sh passes `git rev-parse --short=12 HEAD`).
ARG SPECVERIFY_GIT_COMMIT=unknown
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DSPECVERIFY_BUILD_TESTS=OFF -DSPECVERIFY_BUILD_BENCHMARKS=OFF \
      -DSPECVERIFY_ENABLE_CUDA=${ENABLE_CUDA} \
      "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" \
 && if [ "${ENABLE_CUDA}" = ON ] && ! grep -q '^CMAKE_CUDA_COMPILER:[A-Z]*=.*nvcc' /build/CMakeCache.txt; then \
      echo "ENABLE_CUDA=ON but CMake found no nvcc in the build image (BUILD_IMAGE)" >&2; exit 1; \
    fi \
 && cmake --build /build -j "${JOBS:-$(nproc)}" --target specverify-server specverify-loadgen \
 && strip --strip-unneeded /build/server/specverify-server /build/client/specverify-loadgen
# The runtime stage installs exactly the packages that own the shared
# libraries the two binaries load, as this stage's package manager names them
# (the same distribution as the runtime base; scripts/runtime-packages.sh).
# A library no package owns stops the build.
RUN scripts/runtime-packages.sh /build/server/specverify-server /build/client/specverify-loadgen \
      > /build/runtime-packages.txt \
 && cat /build/runtime-packages.txt

# --- runtime stage: the binaries, their shared libraries, a non-root user.
FROM ${BASE_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
COPY --from=build /build/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update -qq \
 && xargs -a /tmp/runtime-packages.txt apt-get install -y -qq --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /tmp/runtime-packages.txt \
 && groupadd --gid 10001 specverify \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin specverify
COPY --from=build /build/server/specverify-server /build/client/specverify-loadgen /usr/local/bin/
# Numeric, so that Kubernetes' runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001
# gRPC, Prometheus /metrics.
EXPOSE 50051 9401
# The server drains on SIGTERM (health NOT_SERVING, new requests UNAVAILABLE,
# queued and in-flight work finishes within --drain_timeout_ms, exit 0), and
# as PID 1 it still receives it: it blocks the signal and takes it with
# sigwait, and the kernel never drops a blocked signal sent to init.
STOPSIGNAL SIGTERM
# Docker / podman (image format "docker"; the OCI format has no HEALTHCHECK):
# wait for grpc.health.v1 SERVING, then one real Verify checked against the
# workload's oracle (~20 ms). It assumes the default plaintext 0.0.0.0:50051;
# with TLS or another port, override it (--health-cmd). Kubernetes ignores
# HEALTHCHECK and uses its native gRPC probes (deploy/kubernetes/).
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
  CMD ["specverify-loadgen", "--address=127.0.0.1:50051", "--connect-timeout=3s", \
       "--wait-for-serving=3s", "--requests=1", "--warmup=0s", "--concurrency=1", \
       "--pool-requests=1", "--gamma=1", "--sequences-per-request=1", "--row-bytes=0", \
       "--kv-return=none", "--max-error-fraction=0", "--quiet"]
ENTRYPOINT ["specverify-server"]
CMD ["--listen_address=0.0.0.0:50051", "--metrics_address=0.0.0.0:9401", "--device=auto"]
