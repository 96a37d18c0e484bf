# The CUDA build (TRIDENT_CUDA=ON, scripts/build-cuda.sh): a LibTorch 2.x
# from a `torch` wheel, whose CUDA, cuDNN and NCCL libraries sit beside it in
# site-packages/nvidia/*. Checks what it was given, compiles every target
# with TRIDENT_CUDA=1, puts the wheel's NCCL header ahead of any other (the
# CUDA toolkit ships an older one), and makes the binaries find the wheel's
# libraries before the toolkit's when linking and when running.
if(Torch_VERSION VERSION_LESS 2)
  message(FATAL_ERROR "TRIDENT_CUDA needs a LibTorch 2.x; found ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX} "
                      "(set CMAKE_PREFIX_PATH to the torch directory of a CUDA wheel; scripts/build-cuda.sh does)")
endif()
if(NOT EXISTS "${TORCH_INSTALL_PREFIX}/lib/libtorch_cuda.so")
  message(FATAL_ERROR "TRIDENT_CUDA: ${TORCH_INSTALL_PREFIX} is a CPU-only LibTorch (no lib/libtorch_cuda.so)")
endif()
add_compile_definitions(TRIDENT_CUDA=1)

get_filename_component(TRIDENT_WHEEL_SITE "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
find_path(TRIDENT_NCCL_INCLUDE nccl.h HINTS "${TRIDENT_WHEEL_SITE}/nvidia/nccl/include" NO_DEFAULT_PATH)
if(TRIDENT_NCCL_INCLUDE)
  include_directories(BEFORE SYSTEM "${TRIDENT_NCCL_INCLUDE}")
endif()
file(GLOB TRIDENT_WHEEL_LIB_DIRS LIST_DIRECTORIES true "${TRIDENT_WHEEL_SITE}/nvidia/*/lib")
list(PREPEND TRIDENT_WHEEL_LIB_DIRS "${TORCH_INSTALL_PREFIX}/lib")
include(${CMAKE_CURRENT_LIST_DIR}/openblas.cmake)
set(CMAKE_BUILD_RPATH ${TRIDENT_WHEEL_LIB_DIRS} "${TRIDENT_OPENBLAS_DIR}")
list(JOIN TRIDENT_WHEEL_LIB_DIRS ":" TRIDENT_RPATH_LINK)
add_link_options("LINKER:-rpath-link,${TRIDENT_RPATH_LINK}")
message(STATUS "trident: CUDA build against LibTorch ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX}; NCCL header ${TRIDENT_NCCL_INCLUDE}")
