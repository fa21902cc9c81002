#!/usr/bin/env bash
# README command (1): install what is missing, build the `wormchat` program only (not the tests),
# showing the build's progress, and start the chat on the default model. Arguments go to `chat`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
# New build directories use Ninja when installed (why: tools/build.sh).
if command -v ninja > /dev/null; then export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"; fi
if [ ! -f build/CMakeCache.txt ]; then
  echo "chat.sh: configuring the build (Release) in ./build"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > build.log 2>&1 || { cat build.log; exit 1; }
fi
echo "chat.sh: building wormchat (about two minutes the first time on two cores)"
# The build's progress lines ("[12/64] compiling Unity/unity_3_cxx.cxx.o") as they come; the whole
# log in build.log.
set +e
cmake --build build -j"$(nproc)" --target wormchat 2>&1 | tee build.log |
  grep --line-buffered -E '^\[ *[0-9]+(%|/[0-9]+)\]' |
  sed -u 's/Building CXX object CMakeFiles\/[a-z_]*\.dir\//compiling /'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ] || [ ! -x build/wormchat ]; then
  tail -40 build.log
  echo "chat.sh: the build failed (build.log has everything)"
  exit 1
fi
exec ./build/wormchat chat "$@"
