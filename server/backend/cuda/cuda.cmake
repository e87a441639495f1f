# The CUDA executor (issue #5): the server's GPU backend. Only when nvcc was
# found; otherwise the factory offers cpu and noop alone. Plain C++ compiled
# by the host compiler against the CUDA runtime API and the greedy kernels.
# Included at the end of server/CMakeLists.txt: it plugs the executor into
# the backend library (backend_factory.cc tests SPECVERIFY_HAVE_CUDA_EXECUTOR).
if(SPECVERIFY_HAVE_CUDA AND TARGET specverify_kernels_greedy_cuda)
  add_library(specverify_server_cuda
    ${CMAKE_CURRENT_LIST_DIR}/cuda_arena_memory.cc
    ${CMAKE_CURRENT_LIST_DIR}/cuda_executor.cc
    ${CMAKE_CURRENT_LIST_DIR}/cuda_executor_launch.cc
    ${CMAKE_CURRENT_LIST_DIR}/cuda_region.cc
  )
  target_include_directories(specverify_server_cuda PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(specverify_server_cuda
    PUBLIC specverify_server_staging specverify_server_arena specverify_server_regions specverify_kernels_greedy_cuda specverify_tree_cuda specverify_cuda_common
           specverify_kernels_cpu absl::status absl::statusor absl::synchronization
           absl::strings absl::time CUDA::cudart_static Threads::Threads)

  target_link_libraries(specverify_server_backend PUBLIC specverify_server_cuda)
  target_compile_definitions(specverify_server_backend PUBLIC SPECVERIFY_HAVE_CUDA_EXECUTOR=1)
endif()
