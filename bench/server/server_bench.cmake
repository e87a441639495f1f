# bench/server/: service-level benchmarks. The metrics cost benchmark needs
# only the exporter library (server/metrics/metrics.cmake).
if(TARGET specverify_metrics)
  add_executable(specverify_metrics_bench ${CMAKE_CURRENT_LIST_DIR}/metrics_bench.cc)
  target_link_libraries(specverify_metrics_bench PRIVATE specverify_metrics benchmark::benchmark)
  target_include_directories(specverify_metrics_bench PRIVATE ${PROJECT_SOURCE_DIR})
endif()
