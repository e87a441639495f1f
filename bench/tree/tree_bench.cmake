# Token-tree verification benchmark (issue #14): plain main with CUDA events.
# Builds wherever nvcc is; without a GPU it prints a skip message and exits 0.
if(SPECVERIFY_HAVE_CUDA AND TARGET specverify_tree_cuda)
  add_executable(tree_bench ${CMAKE_CURRENT_LIST_DIR}/tree_bench.cu)
  set_target_properties(tree_bench PROPERTIES CUDA_STANDARD 17)
  target_include_directories(tree_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(tree_bench PRIVATE specverify_tree_cuda specverify_tree_workload CUDA::cudart_static)
  # The sampling headers' __host__ __device__ helpers call constexpr
  # functions, as in the kernel libraries.
  target_compile_options(tree_bench PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
endif()
