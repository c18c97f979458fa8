# make install (cmake --install <build dir>): the CLI, headroom_lib and headroom_onnx with their
# headers and a package config for find_package(headroom), and the Python package where Debian's
# Python looks for it: /usr/lib/python3/dist-packages for the /usr prefix, else
# <prefix>/lib/python3.X/dist-packages (/usr/local's is on Debian's sys.path).
include(CMakePackageConfigHelpers)

install(TARGETS headroom RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS headroom_lib headroom_onnx EXPORT headroomTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/headroom)
install(DIRECTORY src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/headroom FILES_MATCHING PATTERN "*.h"
        PATTERN "cli" EXCLUDE)
install(EXPORT headroomTargets NAMESPACE headroom:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/headroom)
configure_package_config_file(cmake/headroomConfig.cmake.in ${CMAKE_BINARY_DIR}/headroomConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/headroom)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/headroomConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/headroomConfig.cmake ${CMAKE_BINARY_DIR}/headroomConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/headroom)

if(NOT DEFINED HEADROOM_PYTHON_INSTALL_DIR)
  if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(HEADROOM_PYTHON_INSTALL_DIR lib/python3/dist-packages)
  else()
    set(HEADROOM_PYTHON_INSTALL_DIR lib/python${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}/dist-packages)
  endif()
endif()
install(TARGETS headroom_python LIBRARY DESTINATION ${HEADROOM_PYTHON_INSTALL_DIR}/headroom)
install(FILES ${HEADROOM_PY_SOURCES} DESTINATION ${HEADROOM_PYTHON_INSTALL_DIR}/headroom)

# The staged install, checked end to end: a consumer project finds the package and links, and the
# installed Python package imports (tests/install/check_install.sh).
add_test(NAME install_staged
         COMMAND ${CMAKE_SOURCE_DIR}/tests/install/check_install.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR}
                 ${Python3_EXECUTABLE})
set_tests_properties(install_staged PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE)
