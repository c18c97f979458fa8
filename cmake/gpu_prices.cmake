# The price catalog (data/gpu_prices.json) is compiled into headroom_lib as a string, like the GPU
# catalog (cmake/gpu_catalog.cmake): no data file at run time; CMake re-runs when the JSON changes.
set(HEADROOM_PRICES_JSON_FILE ${CMAKE_SOURCE_DIR}/data/gpu_prices.json)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${HEADROOM_PRICES_JSON_FILE})
file(READ ${HEADROOM_PRICES_JSON_FILE} HEADROOM_PRICES_JSON)
string(FIND "${HEADROOM_PRICES_JSON}" ")prices_json\"" HEADROOM_PRICES_JSON_BAD)
if(NOT HEADROOM_PRICES_JSON_BAD EQUAL -1)
  message(FATAL_ERROR "data/gpu_prices.json contains the raw-string delimiter )prices_json\"")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/gpu_prices_json.h.in
               ${CMAKE_BINARY_DIR}/generated/cost/gpu_prices_json.h @ONLY)
