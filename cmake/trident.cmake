# One helper per kind of target so each component's CMakeLists is a few lines.
#
# trident_add_library(NAME [TORCH] [CORE CORE_NAME SOURCES...] [CORE_DEPS ...] DEPS ...)
#   lib/NAME: sources src/*.cc, public headers include/, target trident_NAME.
#   TORCH: links LibTorch and reuses the shared precompiled header; without
#   LibTorch (TRIDENT_WITH_TORCH=OFF, the fuzzing build) only the core is built.
#   CORE: the component's torch-free sources (a file format's checks, say) as
#   a library of their own, trident_CORE_NAME, linked by trident_NAME; the
#   fuzz targets and other torch-free code link it alone.
# trident_add_test(NAME [TORCH] DEPS ...)
#   lib/NAME/test/*.cc into one GoogleTest binary, registered with CTest
#   under the label unit.

set(TRIDENT_WARNINGS -Wall -Wextra -Wno-missing-field-initializers)

function(trident_add_library name)
  cmake_parse_arguments(ARG "TORCH" "" "DEPS;CORE;CORE_DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cc)
  if(ARG_CORE)
    list(POP_FRONT ARG_CORE core)
    list(TRANSFORM ARG_CORE PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
    list(REMOVE_ITEM srcs ${ARG_CORE})
    add_library(trident_${core} STATIC ${ARG_CORE})
    target_include_directories(trident_${core} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_compile_options(trident_${core} PRIVATE ${TRIDENT_WARNINGS})
    target_link_libraries(trident_${core} PUBLIC ${ARG_CORE_DEPS})
    list(APPEND ARG_DEPS trident_${core})
  endif()
  if(ARG_TORCH AND NOT TRIDENT_WITH_TORCH)
    return()
  endif()
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
  if(ARG_TORCH AND NOT TRIDENT_WITH_TORCH)
    return()
  endif()
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
