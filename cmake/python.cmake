# Debian's interpreter (/usr/bin/python3, with python3-torch) unless the user picks another.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
find_package(pybind11 CONFIG REQUIRED)

set(HEADROOM_PYTHON_DIR ${CMAKE_BINARY_DIR}/python/headroom)
pybind11_add_module(headroom_python MODULE python/binding.cc)
set_target_properties(headroom_python PROPERTIES OUTPUT_NAME _native LIBRARY_OUTPUT_DIRECTORY ${HEADROOM_PYTHON_DIR})
target_link_libraries(headroom_python PRIVATE headroom_onnx)

# The pure-Python modules are copied next to the extension on every build.
file(GLOB HEADROOM_PY_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/python/headroom/*.py)
set(HEADROOM_PY_COPIES)
foreach(src ${HEADROOM_PY_SOURCES})
  get_filename_component(name ${src} NAME)
  add_custom_command(OUTPUT ${HEADROOM_PYTHON_DIR}/${name} COMMAND ${CMAKE_COMMAND} -E copy ${src} ${HEADROOM_PYTHON_DIR}/${name}
                     DEPENDS ${src} VERBATIM)
  list(APPEND HEADROOM_PY_COPIES ${HEADROOM_PYTHON_DIR}/${name})
endforeach()
add_custom_target(headroom_python_files ALL DEPENDS ${HEADROOM_PY_COPIES})
add_dependencies(headroom_python headroom_python_files)

# pytest from ctest, one test per file so that ctest -j runs them beside each other and beside the
# C++ tests (a single pytest run was 515 s of one core). COST starts the long files first: a clean
# checkout has no CTestCostData.txt to order them by.
file(GLOB HEADROOM_PY_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/python/tests/test_*.py)
foreach(test_file ${HEADROOM_PY_TESTS})
  get_filename_component(stem ${test_file} NAME_WE)
  string(REGEX REPLACE "^test_" "python." name ${stem})
  add_test(NAME ${name}
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${test_file})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;HEADROOM_CLI=$<TARGET_FILE:headroom>;HEADROOM_SOURCE_DIR=${CMAKE_SOURCE_DIR}"
    TIMEOUT 900 LABELS python)
endforeach()
# Seconds each took in one run here (2 cores): the order only, not a limit.
set_tests_properties(python.apply PROPERTIES COST 400)
set_tests_properties(python.validation PROPERTIES COST 150)
set_tests_properties(python.onnx_catalog PROPERTIES COST 120)
set_tests_properties(python.gemel_example python.apply_offload PROPERTIES COST 40)
