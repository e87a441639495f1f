# Token-tree verification tests (issue #14). Included OPTIONAL by tests/kernels/CMakeLists.txt.
specverify_test(tree_reference_test
  SOURCES tree/tree_reference_test.cc
  LIBS specverify_tree_workload specverify_sampling_workload specverify_workload
  LABELS kernels tree)
specverify_test(tree_stats_test
  SOURCES tree/tree_stats_test.cc
  LIBS specverify_tree_workload specverify_sampling_workload
  LABELS kernels tree
  COMPUTE_BOUND)
if(SPECVERIFY_HAVE_CUDA AND TARGET specverify_tree_cuda)
  specverify_test(tree_cuda_test
    SOURCES tree/tree_cuda_test.cc
    LIBS specverify_tree_cuda specverify_tree_workload specverify_sampling_workload specverify_workload
         specverify_cuda_common
    LABELS kernels tree cuda)
endif()
