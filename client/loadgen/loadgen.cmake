# specverify-loadgen: the load-test client (issue #7). Included OPTIONAL from
# client/CMakeLists.txt; the core library is what the tests link.
set(SPECVERIFY_LOADGEN_DIR ${CMAKE_CURRENT_LIST_DIR})

add_library(specverify_loadgen_core
  ${SPECVERIFY_LOADGEN_DIR}/config.cc
  ${SPECVERIFY_LOADGEN_DIR}/histogram.cc
  ${SPECVERIFY_LOADGEN_DIR}/load_workload.cc
  ${SPECVERIFY_LOADGEN_DIR}/loadgen.cc
  ${SPECVERIFY_LOADGEN_DIR}/metrics_scrape.cc
  ${SPECVERIFY_LOADGEN_DIR}/region_transport.cc
  ${SPECVERIFY_LOADGEN_DIR}/report.cc
  ${SPECVERIFY_LOADGEN_DIR}/schedule.cc
  ${SPECVERIFY_LOADGEN_DIR}/step_runner.cc
  ${SPECVERIFY_LOADGEN_DIR}/target.cc
)
target_include_directories(specverify_loadgen_core PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(specverify_loadgen_core
  PUBLIC specverify_client specverify_proto specverify_workload specverify_sampling_workload gRPC::grpc++
         absl::status absl::statusor absl::strings absl::str_format
  PRIVATE specverify_grpc_runtime Threads::Threads)

if(TARGET specverify_client_cuda)
  target_link_libraries(specverify_loadgen_core PUBLIC specverify_client_cuda)
  target_compile_definitions(specverify_loadgen_core PRIVATE SPECVERIFY_LOADGEN_CUDA=1)
endif()

add_executable(specverify-loadgen ${SPECVERIFY_LOADGEN_DIR}/main.cc)
target_link_libraries(specverify-loadgen PRIVATE specverify_loadgen_core specverify_version
  absl::flags absl::flags_parse absl::flags_usage absl::flags_usage_internal absl::flags_config absl::time absl::strings)
