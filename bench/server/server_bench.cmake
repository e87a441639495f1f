# bench/server/: service-level benchmarks. The metrics cost benchmark needs
# only the exporter library (server/metrics/metrics.cmake).
if(TARGET specverify_metrics)
  add_executable(specverify_metrics_bench ${CMAKE_CURRENT_LIST_DIR}/metrics_bench.cc)
  target_link_libraries(specverify_metrics_bench PRIVATE specverify_metrics benchmark::benchmark)
  target_include_directories(specverify_metrics_bench PRIVATE ${PROJECT_SOURCE_DIR})
endif()

# The c=1 latency breakdown against the raw-gRPC ceiling (issue #12).
if(TARGET specverify_client)
  add_executable(specverify-latency-breakdown ${CMAKE_CURRENT_LIST_DIR}/latency_breakdown.cc)
  target_link_libraries(specverify-latency-breakdown PRIVATE specverify_client
    absl::flags absl::flags_parse absl::strings absl::str_format absl::time)
  target_include_directories(specverify-latency-breakdown PRIVATE ${PROJECT_SOURCE_DIR})
endif()
