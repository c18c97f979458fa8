# The GPU catalog (data/gpus.json) is compiled into headroom_lib as a string, so the binary needs no
# data file at run time. CMake re-runs (and the library rebuilds) when the JSON changes.
set(HEADROOM_GPUS_JSON_FILE ${CMAKE_SOURCE_DIR}/data/gpus.json)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${HEADROOM_GPUS_JSON_FILE})
file(READ ${HEADROOM_GPUS_JSON_FILE} HEADROOM_GPUS_JSON)
string(FIND "${HEADROOM_GPUS_JSON}" ")gpus_json\"" HEADROOM_GPUS_JSON_BAD)
if(NOT HEADROOM_GPUS_JSON_BAD EQUAL -1)
  message(FATAL_ERROR "data/gpus.json contains the raw-string delimiter )gpus_json\"")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/gpus_json.h.in
               ${CMAKE_BINARY_DIR}/generated/sim/gpus_json.h @ONLY)
target_include_directories(headroom_lib PRIVATE ${CMAKE_BINARY_DIR}/generated)
