#!/usr/bin/env bash
# ctest ClientLibraryInstallsAndLinks: installs the build into a temporary prefix, then builds and
# runs a separate project that uses find_package(hookgate) → hookgate::client.
#   run.sh BUILD_DIR CXX_COMPILER EXTRA_LINK_FLAGS
set -euo pipefail
build=$1 cxx=$2 link_flags=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/hookgate/bus/publisher.hpp"
test -f "$work/prefix/lib/libhookgate_client.a"
cmake -S "$(dirname "$0")" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_EXE_LINKER_FLAGS="$link_flags" > "$work/configure.log"
cmake --build "$work/build" > "$work/build.log"
"$work/build/consumer"
