# GPU parity tests of the CUDA greedy paths (issue #4). Built only with CUDA;
# on a machine without a GPU every device test skips with a visible reason.
if(SPECVERIFY_HAVE_CUDA)
  specverify_test(greedy_cuda_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/greedy_cuda_test.cc
    LIBS specverify_kernels_greedy_cuda specverify_workload
    LABELS kernels gpu)
  specverify_test(greedy_dispatch_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/greedy_dispatch_test.cc
    LIBS specverify_kernels_greedy_cuda
    LABELS kernels gpu)
endif()
