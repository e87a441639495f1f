# The launchers' sm_90 code probe (kernels/common/sm90_code.h). Built only
# with CUDA; without a GPU the test skips with a visible reason.
if(SPECVERIFY_HAVE_CUDA)
  add_library(specverify_sm90_probe_kernel STATIC ${CMAKE_CURRENT_LIST_DIR}/sm90_probe_kernel.cu)
  target_include_directories(specverify_sm90_probe_kernel PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(specverify_sm90_probe_kernel PUBLIC CUDA::cudart_static)
  specverify_test(sm90_code_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/sm90_code_test.cc
    LIBS specverify_sm90_probe_kernel specverify_cuda_common absl::strings
    LABELS kernels gpu)
endif()
