# server/metrics/: the Prometheus exporter of the ServerMetrics events.
# Included (OPTIONAL) by server/CMakeLists.txt before the server's own targets,
# so paths are relative to this file, not to the including directory.
add_library(specverify_metrics
  ${CMAKE_CURRENT_LIST_DIR}/prometheus_metrics.cc
)
target_include_directories(specverify_metrics PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(specverify_metrics
  PUBLIC absl::status absl::statusor absl::time absl::synchronization
         prometheus-cpp::core
  PRIVATE absl::strings prometheus-cpp::pull)
