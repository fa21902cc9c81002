#!/usr/bin/env bash
# Configures and builds wormchat in Release into ./build (after installing what it needs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
# New build directories use Ninja when it is installed (tools/install-deps.sh installs it): make -j
# given several targets compiles the objects they share once per target, at the same time.
if command -v ninja > /dev/null; then export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j"$(nproc)" >> build.log 2>&1 || { tail -50 build.log; exit 1; }
