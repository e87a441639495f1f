# CUDA greedy verify-and-pack (issue #4): kernels, launchers, dispatcher.
# Only when nvcc was found; the CPU build never sees this library.
if(SPECVERIFY_HAVE_CUDA)
  add_library(specverify_cuda_common
    ${CMAKE_CURRENT_LIST_DIR}/../common/cuda_status.cc
  )
  target_include_directories(specverify_cuda_common PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_link_libraries(specverify_cuda_common
    PUBLIC absl::status absl::statusor absl::strings CUDA::cudart_static)

  add_library(specverify_kernels_greedy_cuda
    ${CMAKE_CURRENT_LIST_DIR}/greedy_cuda.cu
    ${CMAKE_CURRENT_LIST_DIR}/greedy_planned_pack.cu
    ${CMAKE_CURRENT_LIST_DIR}/greedy_dispatch.cc
    ${CMAKE_CURRENT_LIST_DIR}/../layout/row_copy.cu
  )
  target_include_directories(specverify_kernels_greedy_cuda PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_link_libraries(specverify_kernels_greedy_cuda
    PUBLIC specverify_kernels_cpu specverify_cuda_common CUDA::cudart_static)
  # CMake 3.25 knows no CUDA20 dialect flag for nvcc, and the top level asks
  # for CUDA 20: the .cu sources are C++17 (nothing newer is needed there).
  set_target_properties(specverify_kernels_greedy_cuda PROPERTIES CUDA_STANDARD 17)
  # Resource report (registers, spills) in the build log: the first thing to
  # read when a kernel is slower than its byte count says.
  target_compile_options(specverify_kernels_greedy_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills --expt-relaxed-constexpr>)
endif()
