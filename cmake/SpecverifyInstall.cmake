# `cmake --install`: the server and the load generator (with a systemd unit
# and its flags file), the C++ client library as a CMake package, the wire
# API's .proto and the Python client.
#
#   cmake --install build --prefix /opt/specverify
#
# then, in a worker's CMakeLists.txt (CMAKE_PREFIX_PATH=/opt/specverify):
#
#   find_package(specverify 0.1 CONFIG REQUIRED)
#   target_link_libraries(worker PRIVATE specverify::client)
#
# specverify::client is the library of client/verifier_client.h and the
# request helpers beside it; specverify::client_cuda (CUDA builds) adds the
# CUDA regions of client/cuda_region.h. Headers keep their source paths
# ("client/verifier_client.h", "specverify/v1/verifier.pb.h"). The package
# finds gRPC, protobuf and abseil (and the CUDA toolkit, for client_cuda)
# itself; tests/install/ builds a consumer against an installed tree. Builds
# that are not CMake use the pkg-config files beside the package
# (cmake/SpecverifyPkgConfig.cmake): pkg-config --cflags --libs specverify.

include(CMakePackageConfigHelpers)
include(SpecverifyPkgConfig)

set(SPECVERIFY_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/specverify CACHE STRING
    "Where the specverify CMake package files go, relative to the install prefix")
# systemd's unit path has <prefix>/lib/systemd/system for /usr and /usr/local
# (not the multiarch library folder).
set(SPECVERIFY_INSTALL_SYSTEMDDIR lib/systemd/system CACHE STRING
    "Where the systemd unit goes, relative to the install prefix")

# Where `import specverify` is found under the prefix: the layout of the
# interpreter the client runs on (Debian's /usr/bin/python3, which has
# python3-grpcio and python3-numpy; where there is none, the first python3 on
# PATH): lib/python3.11/dist-packages on Debian, whose
# /usr/local/lib/python3.11/dist-packages is on sys.path; site-packages
# elsewhere.
find_program(SPECVERIFY_INSTALL_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT SPECVERIFY_INSTALL_PYTHON3)
  find_program(SPECVERIFY_INSTALL_PYTHON3 python3)
endif()
set(specverify_default_pythondir lib/python3/dist-packages)
if(SPECVERIFY_INSTALL_PYTHON3)
  execute_process(
    COMMAND ${SPECVERIFY_INSTALL_PYTHON3} -c
            "import sysconfig; p = sysconfig.get_path('purelib', vars={'base': '', 'platbase': ''}); print(p.lstrip('/').removeprefix('local/'))"
    OUTPUT_VARIABLE specverify_python_purelib OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE specverify_python_rc ERROR_QUIET)
  if(specverify_python_rc EQUAL 0 AND specverify_python_purelib)
    set(specverify_default_pythondir ${specverify_python_purelib})
  endif()
endif()
set(SPECVERIFY_INSTALL_PYTHONDIR ${specverify_default_pythondir} CACHE STRING
    "Where the specverify Python package goes, relative to the install prefix")

# The project's libraries that `target` links, directly or through others
# (PRIVATE ones included: a static library's private dependencies are link
# dependencies of whoever links it).
function(specverify_collect_linked_targets target out_var)
  set(seen ${${out_var}})
  get_target_property(links ${target} LINK_LIBRARIES)
  if(NOT links)
    set(links)
  endif()
  foreach(link IN LISTS links)
    if(link MATCHES "^specverify_" AND TARGET ${link} AND NOT link IN_LIST seen)
      list(APPEND seen ${link})
      specverify_collect_linked_targets(${link} seen)
    endif()
  endforeach()
  set(${out_var} ${seen} PARENT_SCOPE)
endfunction()

function(specverify_install)
  set(public_targets specverify_client)
  if(TARGET specverify_client_cuda)
    list(APPEND public_targets specverify_client_cuda)
  endif()
  set(library_targets ${public_targets})
  foreach(target IN LISTS public_targets)
    specverify_collect_linked_targets(${target} library_targets)
  endforeach()
  list(REMOVE_DUPLICATES library_targets)
  foreach(target IN LISTS library_targets)
    # specverify::client, specverify::proto, specverify::kernels_cpu, ...
    string(REGEX REPLACE "^specverify_" "" export_name ${target})
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  endforeach()

  install(TARGETS ${library_targets}
          EXPORT specverifyTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT specverifyTargets
          NAMESPACE specverify::
          DESTINATION ${SPECVERIFY_INSTALL_CMAKEDIR}
          COMPONENT client)

  # Headers by their include paths ("client/...", "kernels/..."). The
  # client's headers include the wire API's generated ones and the workload
  # helpers of kernels/; kernels/ goes whole (its headers know nothing of
  # gRPC or the server).
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/client ${PROJECT_SOURCE_DIR}/kernels
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          COMPONENT client
          FILES_MATCHING PATTERN "*.h"
          PATTERN "python" EXCLUDE PATTERN "loadgen" EXCLUDE PATTERN "grpc" EXCLUDE)
  install(FILES ${PROJECT_BINARY_DIR}/proto/specverify/v1/verifier.pb.h
                ${PROJECT_BINARY_DIR}/proto/specverify/v1/verifier.grpc.pb.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/specverify/v1
          COMPONENT client)
  install(FILES ${PROJECT_SOURCE_DIR}/proto/specverify/v1/verifier.proto
          DESTINATION ${CMAKE_INSTALL_DATADIR}/specverify/proto/specverify/v1
          COMPONENT client)

  configure_package_config_file(
    ${PROJECT_SOURCE_DIR}/cmake/specverifyConfig.cmake.in
    ${PROJECT_BINARY_DIR}/specverifyConfig.cmake
    INSTALL_DESTINATION ${SPECVERIFY_INSTALL_CMAKEDIR})
  # 0.x: a minor version may change the API.
  write_basic_package_version_file(
    ${PROJECT_BINARY_DIR}/specverifyConfigVersion.cmake
    VERSION ${PROJECT_VERSION}
    COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/specverifyConfig.cmake ${PROJECT_BINARY_DIR}/specverifyConfigVersion.cmake
          DESTINATION ${SPECVERIFY_INSTALL_CMAKEDIR}
          COMPONENT client)
  specverify_install_pkg_config()

  foreach(program specverify-server specverify-loadgen)
    if(TARGET ${program})
      install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
    endif()
  endforeach()
  if(TARGET specverify-server)
    specverify_install_systemd_unit()
  endif()

  if(TARGET specverify_python)
    install(DIRECTORY ${SPECVERIFY_PYTHON_PACKAGE_DIR}/specverify
            DESTINATION ${SPECVERIFY_INSTALL_PYTHONDIR}
            COMPONENT python
            PATTERN "__pycache__" EXCLUDE)
  endif()
endfunction()

# The systemd unit (deploy/systemd/) names the installed server and its flags
# file by absolute path, so it is written when `cmake --install` runs, under
# the prefix that run installs to (`--prefix` included; a file written at
# configure time would name the configure-time prefix). The flags file goes
# to <prefix>/etc/specverify/ (/etc/specverify/ for the /usr prefix), and
# only where there is none yet: a reinstall keeps an administrator's edits.
function(specverify_install_systemd_unit)
  set(unit_in ${PROJECT_SOURCE_DIR}/deploy/systemd/specverify-server.service.in)
  set(flags_in ${PROJECT_SOURCE_DIR}/deploy/systemd/server.flags)
  set(unit_out ${PROJECT_BINARY_DIR}/systemd/specverify-server.service)
  install(CODE "
    set(specverify_prefix \"\${CMAKE_INSTALL_PREFIX}\")
    if(specverify_prefix STREQUAL \"/usr\")
      set(specverify_etc /etc)
    else()
      set(specverify_etc \"\${specverify_prefix}/${CMAKE_INSTALL_SYSCONFDIR}\")
    endif()
    set(SPECVERIFY_SERVER \"\${specverify_prefix}/${CMAKE_INSTALL_BINDIR}/specverify-server\")
    set(SPECVERIFY_FLAGS_FILE \"\${specverify_etc}/specverify/server.flags\")
    configure_file(\"${unit_in}\" \"${unit_out}\" @ONLY)
    file(INSTALL \"${unit_out}\" DESTINATION \"\${specverify_prefix}/${SPECVERIFY_INSTALL_SYSTEMDDIR}\")
    if(EXISTS \"\$ENV{DESTDIR}\${SPECVERIFY_FLAGS_FILE}\")
      message(STATUS \"Kept: \$ENV{DESTDIR}\${SPECVERIFY_FLAGS_FILE} (already there)\")
    else()
      file(INSTALL \"${flags_in}\" DESTINATION \"\${specverify_etc}/specverify\")
    endif()
  " COMPONENT server)
endfunction()
