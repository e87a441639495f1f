# The end-to-end scrape test needs the server binary and the client library;
# it is built once the server (server/) and client (client/) targets exist.
if(TARGET specverify-server AND TARGET specverify_client)
  if(NOT SPECVERIFY_PROMETHEUS_PATH)
    set(SPECVERIFY_PROMETHEUS_PATH /usr/bin/prometheus)  # the test skips when absent
  endif()
  specverify_test(prometheus_scrape_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/prometheus_scrape_test.cc
    LIBS specverify_client specverify_workload absl::strings
    LABELS metrics integration)
  target_compile_definitions(prometheus_scrape_test PRIVATE
    SPECVERIFY_PROMETHEUS="${SPECVERIFY_PROMETHEUS_PATH}"
    SPECVERIFY_PROMTOOL="${SPECVERIFY_PROMTOOL_PATH}"
    SPECVERIFY_SERVER_BINARY="$<TARGET_FILE:specverify-server>")
  add_dependencies(prometheus_scrape_test specverify-server)
endif()
