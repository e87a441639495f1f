# Tests of specverify-loadgen (issue #7). Included OPTIONAL from
# tests/client/CMakeLists.txt; needs the loadgen targets from client/.
if(NOT TARGET specverify_loadgen_core)
  return()
endif()
set(SPECVERIFY_LOADGEN_TEST_DIR ${CMAKE_CURRENT_LIST_DIR})

# Pure units: schedules, flags, request pools, report, exit codes, /metrics
# parsing.
specverify_test(loadgen_unit_test
  SOURCES
    ${SPECVERIFY_LOADGEN_TEST_DIR}/config_test.cc
    ${SPECVERIFY_LOADGEN_TEST_DIR}/exit_code_test.cc
    ${SPECVERIFY_LOADGEN_TEST_DIR}/load_workload_test.cc
    ${SPECVERIFY_LOADGEN_TEST_DIR}/metrics_scrape_test.cc
    ${SPECVERIFY_LOADGEN_TEST_DIR}/report_test.cc
    ${SPECVERIFY_LOADGEN_TEST_DIR}/schedule_test.cc
  LIBS specverify_loadgen_core
  LABELS loadgen)
# The latency histogram against exact quantiles of millions of samples.
specverify_test(loadgen_histogram_test
  SOURCES ${SPECVERIFY_LOADGEN_TEST_DIR}/histogram_test.cc
  LIBS specverify_loadgen_core
  LABELS loadgen
  COMPUTE_BOUND)

# The whole load generator against an in-process fake Verifier on loopback,
# including fakes that answer wrongly.
specverify_test(loadgen_fake_server_test
  SOURCES
    ${SPECVERIFY_LOADGEN_TEST_DIR}/fake_verifier.cc
    ${SPECVERIFY_LOADGEN_TEST_DIR}/loadgen_fake_server_test.cc
  LIBS specverify_loadgen_core
  LABELS loadgen)
target_compile_definitions(loadgen_fake_server_test PRIVATE
  SPECVERIFY_LOADGEN_BINARY="$<TARGET_FILE:specverify-loadgen>")
add_dependencies(loadgen_fake_server_test specverify-loadgen)
specverify_version_flag_test(loadgen_version_flag specverify-loadgen LABELS loadgen)

# The load generator against the real server (CPU and no-op backends) started
# as child processes on loopback, in every mode.
if(TARGET specverify-server)
  specverify_test(loadgen_server_test
    SOURCES
      ${SPECVERIFY_LOADGEN_TEST_DIR}/server_process.cc
      ${SPECVERIFY_LOADGEN_TEST_DIR}/loadgen_server_test.cc
    LIBS specverify_loadgen_core
    LABELS loadgen)
  target_compile_definitions(loadgen_server_test PRIVATE
    SPECVERIFY_SERVER_BINARY="$<TARGET_FILE:specverify-server>")
  add_dependencies(loadgen_server_test specverify-server)
endif()

# --mode=sampled against the real CPU server (issue #8): zero wrong answers.
if(TARGET specverify-server)
  specverify_test(loadgen_sampled_test
    SOURCES
      ${SPECVERIFY_LOADGEN_TEST_DIR}/server_process.cc
      ${SPECVERIFY_LOADGEN_TEST_DIR}/loadgen_sampled_test.cc
    LIBS specverify_loadgen_core
    LABELS loadgen)
  target_compile_definitions(loadgen_sampled_test PRIVATE
    SPECVERIFY_SERVER_BINARY="$<TARGET_FILE:specverify-server>")
  add_dependencies(loadgen_sampled_test specverify-server)
endif()

# TLS and mutual TLS against the real server (issue #15, item 10).
if(TARGET specverify-server)
  specverify_test(loadgen_tls_test
    SOURCES
      ${SPECVERIFY_LOADGEN_TEST_DIR}/server_process.cc
      ${SPECVERIFY_LOADGEN_TEST_DIR}/loadgen_tls_test.cc
    LIBS specverify_loadgen_core specverify_client
    LABELS loadgen)
  target_compile_definitions(loadgen_tls_test PRIVATE
    SPECVERIFY_SERVER_BINARY="$<TARGET_FILE:specverify-server>")
  add_dependencies(loadgen_tls_test specverify-server)
endif()
