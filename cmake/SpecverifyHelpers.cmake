# specverify_test(<name> SOURCES <files...> LIBS <targets...> [LABELS <labels...>] [COMPUTE_BOUND])
# One GoogleTest binary, its cases registered with CTest one by one.
#
# The test's own sources are compiled -Og whatever the build type: the code
# under test is in the libraries, built with the build type's flags (Release:
# -O3), and the suites' GoogleTest code optimized at -O3 was half the
# build's CPU time (a server suite: 15.4 s at -O3, 8.8 s at -Og; GCC 12).
# SPECVERIFY_TEST_OPTIMIZATION= (empty) keeps the build type's level. The
# third-party headers every suite parses come precompiled, once, from
# specverify_test_pch (specverify_test_pch_for_level()). Together, on
# the 2-core CI machine: scripts/build.sh 851 -> 528 CPU seconds (463 -> 294 s
# wall), scripts/sanitize.sh 524 -> 433 s (bench/build/results/2026-11-27-test-build).
#
# COMPUTE_BOUND marks a suite whose own code (statistics over millions of
# draws, loops over every input of a header's inline math) is most of its
# run time: it compiles at SPECVERIFY_TEST_COMPUTE_OPTIMIZATION (-Og) even
# where the other suites take a lower level. scripts/sanitize.sh builds the
# other suites at -O0, where clang with ASan compiles them in half the time
# (a server suite 30.6 -> 16.1 s) and they run nearly as fast; the
# compute-bound ones ran 2-10x slower there (tree_stats_test 62 -> 243 s of
# CTest time; bench/build/results/2026-11-29-sanitizer-O0).
function(specverify_test name)
  cmake_parse_arguments(ARG "COMPUTE_BOUND" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  set(level "${SPECVERIFY_TEST_OPTIMIZATION}")
  if(ARG_COMPUTE_BOUND)
    set(level "${SPECVERIFY_TEST_COMPUTE_OPTIMIZATION}")
  endif()
  specverify_test_compile_options(${name} "${level}")
  specverify_test_reuse_precompiled_headers(${name} "${level}")
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}")
endfunction()

set(SPECVERIFY_TEST_OPTIMIZATION "-Og" CACHE STRING
    "Optimization flag for the tests' own sources (empty: the build type's)")
set(SPECVERIFY_TEST_COMPUTE_OPTIMIZATION "-Og" CACHE STRING
    "Optimization flag for the own sources of COMPUTE_BOUND suites (empty: the build type's)")
# -pthread for every suite: gRPC's headers in the precompiled header were
# built with it (_REENTRANT), and GCC refuses the header to a suite without.
function(specverify_test_compile_options target level)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-pthread>)
  if(level)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${level}>)
  endif()
endfunction()

# The precompiled GoogleTest, gRPC, protobuf and abseil headers the test
# suites share, one target per optimization level in use (clang refuses a
# header built at another level), made when a suite first asks:
# specverify_test_pch for SPECVERIFY_TEST_OPTIMIZATION's level. Third-party
# headers only: a change to a project header must not rebuild every suite.
# A suite reusing one must be compiled with the same flags, so it takes
# specverify_test_compile_options too; extra definitions of a suite are
# allowed (GCC and clang accept macros the header was built without).
option(SPECVERIFY_TEST_PCH "Precompile the headers the test suites share" ON)
function(specverify_test_pch_for_level out level)
  if("${level}" STREQUAL "${SPECVERIFY_TEST_OPTIMIZATION}")
    set(pch specverify_test_pch)
  elseif(level)
    string(MAKE_C_IDENTIFIER "specverify_test_pch${level}" pch)
  else()
    set(pch specverify_test_pch_build_type)
  endif()
  if(NOT TARGET ${pch})
    add_library(${pch} STATIC ${PROJECT_SOURCE_DIR}/tests/testing/precompiled_headers.cc)
    specverify_test_compile_options(${pch} "${level}")
    target_link_libraries(${pch} PRIVATE GTest::gtest GTest::gmock gRPC::grpc++ protobuf::libprotobuf
                          absl::status absl::statusor absl::strings absl::synchronization absl::time)
    target_precompile_headers(${pch} PRIVATE
      <gmock/gmock.h> <gtest/gtest.h> <grpcpp/grpcpp.h> <google/protobuf/message.h>
      <absl/status/statusor.h> <absl/strings/str_cat.h> <absl/synchronization/mutex.h> <absl/time/time.h>)
  endif()
  set(${out} ${pch} PARENT_SCOPE)
endfunction()

function(specverify_test_reuse_precompiled_headers target level)
  if(NOT SPECVERIFY_TEST_PCH)
    return()
  endif()
  specverify_test_pch_for_level(pch "${level}")
  target_precompile_headers(${target} REUSE_FROM ${pch})
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
