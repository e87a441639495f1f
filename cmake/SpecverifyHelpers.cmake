# specverify_test(<name> SOURCES <files...> LIBS <targets...> [LABELS <labels...>])
# One GoogleTest binary, its cases registered with CTest one by one.
#
# The test's own sources are compiled -Og whatever the build type: the code
# under test is in the libraries, built with the build type's flags (Release:
# -O3), and the suites' GoogleTest code optimized at -O3 was half the
# build's CPU time (a server suite: 15.4 s at -O3, 8.8 s at -Og; GCC 12).
# SPECVERIFY_TEST_OPTIMIZATION= (empty) keeps the build type's level. The
# third-party headers every suite parses come precompiled, once, from
# specverify_test_pch (specverify_test_precompiled_headers()). Together, on
# the 2-core CI machine: scripts/build.sh 851 -> 528 CPU seconds (463 -> 294 s
# wall), scripts/sanitize.sh 524 -> 433 s (bench/build/results/2026-11-27-test-build).
function(specverify_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  specverify_test_compile_options(${name})
  if(TARGET specverify_test_pch)
    target_precompile_headers(${name} REUSE_FROM specverify_test_pch)
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}")
endfunction()

set(SPECVERIFY_TEST_OPTIMIZATION "-Og" CACHE STRING
    "Optimization flag for the tests' own sources (empty: the build type's)")
# -pthread for every suite: gRPC's headers in the precompiled header were
# built with it (_REENTRANT), and GCC refuses the header to a suite without.
function(specverify_test_compile_options target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-pthread>)
  if(SPECVERIFY_TEST_OPTIMIZATION)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${SPECVERIFY_TEST_OPTIMIZATION}>)
  endif()
endfunction()

# The precompiled GoogleTest, gRPC, protobuf and abseil headers the test
# suites share (tests/CMakeLists.txt calls this before any specverify_test).
# Third-party headers only: a change to a project header must not rebuild
# every suite. A suite reusing it must be compiled with the same flags, so
# it takes specverify_test_compile_options too; extra definitions of a suite
# are allowed (GCC and clang accept macros the header was built without).
option(SPECVERIFY_TEST_PCH "Precompile the headers the test suites share" ON)
function(specverify_test_precompiled_headers)
  if(NOT SPECVERIFY_TEST_PCH)
    return()
  endif()
  add_library(specverify_test_pch STATIC ${PROJECT_SOURCE_DIR}/tests/testing/precompiled_headers.cc)
  specverify_test_compile_options(specverify_test_pch)
  target_link_libraries(specverify_test_pch PRIVATE GTest::gtest GTest::gmock gRPC::grpc++ protobuf::libprotobuf
                        absl::status absl::statusor absl::strings absl::synchronization absl::time)
  target_precompile_headers(specverify_test_pch PRIVATE
    <gmock/gmock.h> <gtest/gtest.h> <grpcpp/grpcpp.h> <google/protobuf/message.h>
    <absl/status/statusor.h> <absl/strings/str_cat.h> <absl/synchronization/mutex.h> <absl/time/time.h>)
endfunction()

# A CTest test that `<program> --version` exits 0 and prints
# "<program> <project version>+<12-hex git commit>[-dirty]" (or "+unknown"
# where the tree has no git), the string GetServerInfo reports.
function(specverify_version_flag_test name program)
  string(REPLACE "." "\\." version_pattern ${PROJECT_VERSION})
  add_test(NAME ${name}
           COMMAND bash -c "out=$(\"$0\" --version) || exit 1; echo \"$out\"; \
[[ $out =~ ^${program}\\ ${version_pattern}\\+([0-9a-f]{12}(-dirty)?|unknown)$ ]]"
                   $<TARGET_FILE:${program}>)
  set_tests_properties(${name} PROPERTIES TIMEOUT 30 ${ARGN})
endfunction()
