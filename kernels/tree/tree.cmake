# Token-tree verification (issue #14): CPU reference and validation, the tree
# workload generator, and (with CUDA) the kernels. Included OPTIONAL by
# kernels/CMakeLists.txt after the greedy and sampling fragments (it links
# their CPU libraries).

add_library(specverify_tree_cpu
  ${CMAKE_CURRENT_LIST_DIR}/tree_reference.cc
)
target_include_directories(specverify_tree_cpu PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
target_link_libraries(specverify_tree_cpu
  PUBLIC specverify_sampling_cpu specverify_kernels_cpu absl::status absl::statusor absl::strings)

add_library(specverify_tree_workload
  ${CMAKE_CURRENT_LIST_DIR}/../workload/tree_workload.cc
)
target_include_directories(specverify_tree_workload PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
target_link_libraries(specverify_tree_workload PUBLIC specverify_tree_cpu specverify_sampling_workload absl::strings)

if(SPECVERIFY_HAVE_CUDA AND TARGET specverify_cuda_common)
  add_library(specverify_tree_cuda
    ${CMAKE_CURRENT_LIST_DIR}/tree_cuda.cu
  )
  target_include_directories(specverify_tree_cuda PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_link_libraries(specverify_tree_cuda
    PUBLIC specverify_tree_cpu specverify_cuda_common CUDA::cudart_static)
  # CMake 3.25 knows no CUDA20 dialect flag for nvcc: the .cu is C++17.
  set_target_properties(specverify_tree_cuda PROPERTIES CUDA_STANDARD 17)
  # -lineinfo: compute-sanitizer and ncu name source lines (no code change).
  target_compile_options(specverify_tree_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills --expt-relaxed-constexpr -lineinfo>)
endif()
