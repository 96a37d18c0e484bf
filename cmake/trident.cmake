# One helper per kind of target so each component's CMakeLists is a few lines.
#
# trident_add_library(NAME [TORCH] DEPS ...)
#   lib/NAME: sources src/*.cc, public headers include/, target trident_NAME.
#   TORCH: links LibTorch and reuses the shared precompiled header.
# trident_add_test(NAME [TORCH] DEPS ... [LABELS ...])
#   lib/NAME/test/*.cc into one GoogleTest binary, registered with CTest.

set(TRIDENT_WARNINGS -Wall -Wextra -Wno-missing-field-initializers)

function(trident_add_library name)
  cmake_parse_arguments(ARG "TORCH" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cc)
  add_library(trident_${name} STATIC ${srcs})
  target_include_directories(trident_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_compile_options(trident_${name} PRIVATE ${TRIDENT_WARNINGS})
  target_link_libraries(trident_${name} PUBLIC ${ARG_DEPS})
  if(ARG_TORCH)
    target_link_libraries(trident_${name} PUBLIC ${TORCH_LIBRARIES})
    target_precompile_headers(trident_${name} REUSE_FROM trident_torch_pch)
  endif()
endfunction()

function(trident_add_test name)
  cmake_parse_arguments(ARG "TORCH" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test/*.cc)
  add_executable(${name}_test ${srcs})
  target_compile_options(${name}_test PRIVATE ${TRIDENT_WARNINGS})
  target_link_libraries(${name}_test PRIVATE trident_${name} ${ARG_DEPS} GTest::gtest_main)
  if(ARG_TORCH)
    target_precompile_headers(${name}_test REUSE_FROM trident_torch_pch)
  endif()
  target_compile_definitions(${name}_test PRIVATE
    TRIDENT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    TRIDENT_BINARY_DIR="${PROJECT_BINARY_DIR}")
  include(GoogleTest)
  # Tests never read the user's calibration (parallel.cluster: auto): an empty cache.
  gtest_discover_tests(${name}_test DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 600 LABELS unit ENVIRONMENT "TRIDENT_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
endfunction()
