# Rejection sampling tests (issue #8). Included OPTIONAL by tests/kernels/CMakeLists.txt.
specverify_test(sampling_math_test
  SOURCES sampling/sampling_math_test.cc
  LIBS specverify_sampling_cpu
  LABELS kernels sampling
  COMPUTE_BOUND)
specverify_test(fast_divisor_test
  SOURCES sampling/fast_divisor_test.cc
  LIBS specverify_sampling_cpu
  LABELS kernels sampling
  COMPUTE_BOUND)
specverify_test(reference_rows_test
  SOURCES sampling/reference_rows_test.cc
  LIBS specverify_sampling_cpu
  LABELS kernels sampling
  COMPUTE_BOUND)
specverify_test(rejection_reference_test
  SOURCES sampling/rejection_reference_test.cc
  LIBS specverify_sampling_workload
  LABELS kernels sampling)
specverify_test(rejection_finish_test
  SOURCES sampling/rejection_finish_test.cc
  LIBS specverify_sampling_cpu
  LABELS kernels sampling)
specverify_test(sampling_workload_test
  SOURCES sampling/sampling_workload_test.cc
  LIBS specverify_sampling_workload
  LABELS kernels sampling)
specverify_test(rejection_stats_test
  SOURCES sampling/rejection_stats_test.cc
  LIBS specverify_sampling_workload
  LABELS kernels sampling
  COMPUTE_BOUND)
if(SPECVERIFY_HAVE_CUDA AND TARGET specverify_sampling_cuda AND TARGET specverify_cuda_common)
  specverify_test(rejection_cuda_test
    SOURCES sampling/rejection_cuda_test.cc
    LIBS specverify_sampling_cuda specverify_sampling_workload specverify_cuda_common
    LABELS kernels sampling cuda)
endif()
