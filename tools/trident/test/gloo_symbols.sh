#!/usr/bin/env bash
# With a LibTorch wheel, trident compiles ProcessGroupGloo.hpp against
# Debian's Gloo headers, another Gloo revision than the one linked into the
# wheel (Note [Backends], lib/comm/src/backends.cc). That is sound only while
# trident's binary holds no code of Gloo's own: every Gloo object must be
# built and used by the wheel. This fails on any symbol the binary defines
# in namespace gloo or in a Gloo class of c10d's (ProcessGroupGloo's Options
# excepted: it holds only pointers to Gloo objects).
#   gloo_symbols.sh BINARY
set -u
bin=$1
symbols=$(nm -C --defined-only "$bin") || { echo "FAIL gloo-symbols: cannot read the symbols of $bin"; exit 1; }
found=$(printf '%s\n' "$symbols" | grep -E '(^|[^A-Za-z0-9_])gloo::|Gloo::' | grep -v 'ProcessGroupGloo::Options')
if [ -n "$found" ]; then
  echo "FAIL gloo-symbols: $bin defines code of Gloo's own, compiled against headers of another Gloo revision:"
  printf '%s\n' "$found" | head -20
  exit 1
fi
echo "ok gloo-symbols: $bin defines no Gloo code ($(nm -C --undefined-only "$bin" | grep -c 'ProcessGroupGloo') ProcessGroupGloo symbols come from LibTorch)"
