# OpenBLAS's OpenMP build (Debian's libopenblas0-openmp), which trident's
# binaries run whatever libblas.so.3 the system's alternatives name: its
# directory goes on their RUNPATH, so libblas.so.3 (trident's small batched
# products, and LibTorch's float32 products, Note [One LibTorch]) is found
# there first. Built with OpenMP, it shares LibTorch's pool of workers
# instead of running a pool of its own beside it (Note [CPU process
# settings] in lib/process/include/trident/process/process.h).
set(TRIDENT_OPENBLAS_DIR "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp" CACHE PATH
    "the directory of OpenBLAS's OpenMP build (libblas.so.3)")
if(NOT EXISTS "${TRIDENT_OPENBLAS_DIR}/libblas.so.3")
  message(FATAL_ERROR "TRIDENT_OPENBLAS_DIR=${TRIDENT_OPENBLAS_DIR} has no libblas.so.3: install libopenblas0-openmp "
                      "(make deps, scripts/install-deps.sh), or give the directory of OpenBLAS's OpenMP build")
endif()
