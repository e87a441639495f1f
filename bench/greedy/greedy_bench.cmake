# Greedy verify-and-pack benchmark (issue #4): plain main with CUDA events.
# Builds wherever nvcc is; without a GPU it prints a skip message and exits 0.
if(SPECVERIFY_HAVE_CUDA)
  add_executable(greedy_bench
    ${CMAKE_CURRENT_LIST_DIR}/greedy_bench.cc
    ${CMAKE_CURRENT_LIST_DIR}/bench_kernels.cu
  )
  set_target_properties(greedy_bench PROPERTIES CUDA_STANDARD 17)
  target_include_directories(greedy_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(greedy_bench PRIVATE
    specverify_kernels_greedy_cuda specverify_workload CUDA::cudart_static)
endif()
