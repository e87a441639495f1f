# specverify server image.
#
#   docker build -t specverify .
#   docker run --gpus all -p 50051:50051 -p 9401:9401 specverify
#
# Builder and runtime share Ubuntu 24.04, whose archive carries the same
# library generation the project is developed against on Debian bookworm
# (gRPC 1.51, protobuf 3.21, abseil 20220623, prometheus-cpp 1.0.1).
# The CUDA runtime is linked statically, so the runtime image needs only the
# driver that `--gpus` mounts; without a GPU the server runs its CPU backend.
ARG CUDA_VERSION=13.0.0
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DSPECVERIFY_BUILD_TESTS=OFF -DSPECVERIFY_BUILD_BENCHMARKS=OFF \
      -DCMAKE_CUDA_ARCHITECTURES="90-real;80-real;75-virtual" \
 && cmake --build /build --target specverify-server specverify-loadgen

FROM nvidia/cuda:${CUDA_VERSION}-base-ubuntu24.04
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51t64 libgrpc29t64 libprotobuf32t64 libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 libcivetweb1 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home specverify
COPY --from=build /build/server/specverify-server /build/client/specverify-loadgen /usr/local/bin/
USER specverify
EXPOSE 50051 9401
ENTRYPOINT ["specverify-server", "--listen_address=0.0.0.0:50051", "--metrics_address=0.0.0.0:9401", "--device=auto"]
