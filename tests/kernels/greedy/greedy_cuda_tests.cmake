# GPU parity tests of the CUDA greedy paths (issue #4). Built only with CUDA;
# on a machine without a GPU every device test skips with a visible reason.
if(SPECVERIFY_HAVE_CUDA)
  specverify_test(greedy_cuda_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/greedy_cuda_test.cc
    LIBS specverify_kernels_greedy_cuda specverify_workload
    LABELS kernels gpu)
  # The row copies' CUDA launchers against their CPU references.
  specverify_test(row_copy_cuda_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/../layout/row_copy_test.cc
    LIBS specverify_kernels_greedy_cuda specverify_workload
    LABELS kernels gpu)
  target_compile_definitions(row_copy_cuda_test PRIVATE SPECVERIFY_TEST_CUDA=1)
  specverify_test(greedy_dispatch_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/greedy_dispatch_test.cc
    LIBS specverify_kernels_greedy_cuda
    LABELS kernels gpu)
endif()
