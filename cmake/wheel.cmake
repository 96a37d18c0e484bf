# The CPU build against the LibTorch inside a `torch` wheel (TRIDENT_TORCH_DIR,
# the wheel's torch directory; the Makefile passes the project environment's,
# scripts/install-peers.sh). See Note [One LibTorch] in docs/design.md.
#
# The wheel on the Python package index is the CUDA one. Its TorchConfig.cmake
# wants a CUDA toolkit at configure time and adds libtorch_cuda, cuDNN and
# NCCL to every link, although a CPU build calls none of them. So the CPU build
# does not ask it: it links the two CPU libraries, libtorch_cpu (ATen,
# autograd, c10d with Gloo, MKL and oneDNN linked in) and libc10, after
# libblas (below), compiles
# with the wheel's headers as C++20 (they need it from 2.13 on) and the C++11
# string ABI (the wheels use it from 2.7 on), and runs with the wheel's lib/
# on the binaries' RPATH.
set(TRIDENT_TORCH_DIR "${TRIDENT_TORCH_DIR}" CACHE PATH "a torch wheel's torch directory")
foreach(file include/torch/headeronly/version.h lib/libtorch_cpu.so lib/libc10.so lib/libgomp.so.1)
  if(NOT EXISTS "${TRIDENT_TORCH_DIR}/${file}")
    message(FATAL_ERROR "TRIDENT_TORCH_DIR=${TRIDENT_TORCH_DIR} has no ${file} (give the torch directory of a wheel: "
                        "python -c 'import torch, os; print(os.path.dirname(torch.__file__))')")
  endif()
endforeach()
file(READ "${TRIDENT_TORCH_DIR}/include/torch/headeronly/version.h" version_header)
string(REGEX MATCH "define TORCH_VERSION[ \\\n]*\"([0-9.]+)" version_line "${version_header}")
set(Torch_VERSION "${CMAKE_MATCH_1}")
if(Torch_VERSION VERSION_LESS 2.5)
  message(FATAL_ERROR "TRIDENT_TORCH_DIR: LibTorch ${Torch_VERSION} at ${TRIDENT_TORCH_DIR}; trident needs 2.5 or newer")
endif()
set(TORCH_INSTALL_PREFIX "${TRIDENT_TORCH_DIR}")
add_library(trident_libtorch INTERFACE IMPORTED)
# libgomp and libblas.so.3 come first, in that order. The wheel's libgomp
# (the OpenMP runtime LibTorch was built with) loads before anything else
# can ask for one, so OpenBLAS's OpenMP build (cmake/openblas.cmake) runs on
# LibTorch's own pool of workers (Note [CPU process settings]). And the
# wheel's LibTorch calls sgemm_ by its dynamic name, so the OpenBLAS ahead of
# it in the lookup order does LibTorch's float32 products, with trident's
# kernel choice (Note [BLAS kernel]). On AMD Zen 4, with the wheel's MKL
# 2024.2 doing them the mlp step ran at 0.45x and mmt at 0.49x of OpenBLAS
# (Cooperlake) (docs/benchmarks/libtorch.md). Debian's g++ links
# --as-needed, which would drop both from a binary that calls neither itself
# (a unit test): every binary keeps them.
include(${CMAKE_CURRENT_LIST_DIR}/openblas.cmake)
set_target_properties(trident_libtorch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${TRIDENT_TORCH_DIR}/include;${TRIDENT_TORCH_DIR}/include/torch/csrc/api/include"
  INTERFACE_LINK_LIBRARIES "-Wl,--no-as-needed;${TRIDENT_TORCH_DIR}/lib/libgomp.so.1;${TRIDENT_OPENBLAS_DIR}/libblas.so.3;-Wl,--as-needed;${TRIDENT_TORCH_DIR}/lib/libtorch_cpu.so;${TRIDENT_TORCH_DIR}/lib/libc10.so"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1")
set(TORCH_LIBRARIES trident_libtorch)
set(CMAKE_BUILD_RPATH "${TRIDENT_TORCH_DIR}/lib;${TRIDENT_OPENBLAS_DIR}")
set(CMAKE_INSTALL_RPATH "${TRIDENT_TORCH_DIR}/lib;${TRIDENT_OPENBLAS_DIR}")
message(STATUS "trident: CPU build against LibTorch ${Torch_VERSION} at ${TRIDENT_TORCH_DIR}")
