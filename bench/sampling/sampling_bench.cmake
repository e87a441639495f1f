# The CPU reference's time per batch (the CPU backend's sampler): builds everywhere.
add_executable(reference_bench ${CMAKE_CURRENT_LIST_DIR}/reference_bench.cc)
target_include_directories(reference_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(reference_bench PRIVATE specverify_sampling_workload)

# Rejection-sampling benchmark (issue #8): plain main with CUDA events.
# Builds wherever nvcc is; without a GPU it prints a skip message and exits 0.
if(SPECVERIFY_HAVE_CUDA AND TARGET specverify_sampling_cuda)
  add_executable(rejection_bench ${CMAKE_CURRENT_LIST_DIR}/rejection_bench.cu)
  set_target_properties(rejection_bench PROPERTIES CUDA_STANDARD 17)
  target_include_directories(rejection_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(rejection_bench PRIVATE specverify_sampling_cuda specverify_sampling_workload CUDA::cudart_static)
  # rejection_params.h's __host__ __device__ helpers call constexpr functions,
  # as in the kernel library (sampling.cmake).
  target_compile_options(rejection_bench PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
endif()
