# CUDA executor tests (issue #5): included from tests/server/CMakeLists.txt.
# Built whenever the executor is (nvcc present); each test skips visibly
# (GTEST_SKIP) on a machine without a GPU.
if(TARGET specverify_server_cuda)
  specverify_test(cuda_executor_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_executor_test.cc
    LIBS specverify_server_cuda specverify_workload
    LABELS server cuda)
  specverify_test(cuda_server_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_server_test.cc
    LIBS specverify_server_core specverify_server_cuda specverify_client
    LABELS server cuda)
  # CUDA regions across processes: a separate worker exports device memory.
  add_executable(cuda_ipc_worker ${CMAKE_CURRENT_LIST_DIR}/cuda_ipc_worker.cc)
  target_link_libraries(cuda_ipc_worker PRIVATE specverify_client_cuda)
  target_include_directories(cuda_ipc_worker PRIVATE ${PROJECT_SOURCE_DIR})
  specverify_test(cuda_region_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_region_test.cc
    LIBS specverify_server_core specverify_server_cuda specverify_client
    LABELS server cuda)
  target_compile_definitions(cuda_region_test PRIVATE
    SPECVERIFY_CUDA_IPC_WORKER="$<TARGET_FILE:cuda_ipc_worker>")
  add_dependencies(cuda_region_test cuda_ipc_worker)
endif()

# The executor and the device arena take locks: clang's thread-safety
# analysis over them, as tests/server does for the rest of the server.
if(TARGET specverify_server_cuda AND SPECVERIFY_CLANGXX)
  add_test(NAME cuda_executor_thread_safety_analysis
    COMMAND ${SPECVERIFY_CLANGXX} -std=c++20 -fsyntax-only
            -Wthread-safety -Werror=thread-safety
            -I${PROJECT_SOURCE_DIR} -I${CUDAToolkit_INCLUDE_DIRS}
            ${PROJECT_SOURCE_DIR}/server/backend/cuda/cuda_executor.cc
            ${PROJECT_SOURCE_DIR}/server/backend/cuda/cuda_arena_memory.cc)
  set_tests_properties(cuda_executor_thread_safety_analysis PROPERTIES LABELS "server;lint;cuda")
endif()
