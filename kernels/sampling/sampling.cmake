# Rejection sampling (issue #8): CPU reference, validation, workload generator,
# and (with CUDA) the kernels. Included OPTIONAL by kernels/CMakeLists.txt.

add_library(specverify_sampling_cpu
  sampling/reference_rows.cc
  sampling/rejection_finish.cc
  sampling/rejection_reference.cc
  sampling/rejection_validate.cc
)
target_include_directories(specverify_sampling_cpu PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
target_link_libraries(specverify_sampling_cpu PUBLIC specverify_kernels_cpu absl::status absl::statusor absl::strings)

add_library(specverify_sampling_workload
  workload/sampling_workload.cc
)
target_include_directories(specverify_sampling_workload PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
target_link_libraries(specverify_sampling_workload PUBLIC specverify_sampling_cpu)

if(SPECVERIFY_HAVE_CUDA AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/sampling/rejection_sample.cu)
  add_library(specverify_sampling_cuda
    sampling/rejection_sample.cu
  )
  target_include_directories(specverify_sampling_cuda PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_link_libraries(specverify_sampling_cuda PUBLIC specverify_sampling_cpu CUDA::cudart_static)
  # CMake 3.25 knows no CUDA20 dialect flag for nvcc: the .cu is C++17.
  set_target_properties(specverify_sampling_cuda PROPERTIES CUDA_STANDARD 17)
  target_compile_options(specverify_sampling_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills --expt-relaxed-constexpr>)
endif()
