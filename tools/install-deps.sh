#!/usr/bin/env bash
# Installs the Debian 12 packages wormchat builds with (nothing else is downloaded, ever).
# Skips apt entirely when everything is already installed.
set -euo pipefail
# ninja-build runs the builds (tools/build.sh and the sanitizer builds).
# clang, its runtimes (libFuzzer) and libomp build the fuzz harnesses (tools/fuzz.sh).
# python3-numpy runs tools/python/check_reference.py (tools/test.sh); regenerating fixtures
# needs python3-torch too, which is not installed here (tools/README.md).
# libsource-highlight-dev colours the code blocks of the chat's replies (app/tui/syntax_highlight.*).
# libcpp-httplib-dev is `wormchat serve`'s HTTP (app/serve/).
# nodejs and npm run the test of `wormchat serve` under the official `openai` npm client
# (tests/app/openai_client; tools/test.sh installs the client with npm ci); the build never needs them.
packages=(g++ make cmake ninja-build pkg-config libsentencepiece-dev libncurses-dev libcli11-dev
          libgtest-dev nlohmann-json3-dev libhwy-dev libxxhash-dev gnuplot-nox tmux clang
          libclang-rt-dev libomp-dev libpcre2-dev libutf8proc-dev libopenmpi-dev openmpi-bin
          python3-numpy libsource-highlight-dev libcpp-httplib-dev nodejs)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Debian's npm is a package of its own; a nodejs from elsewhere (NodeSource) bundles npm and
# conflicts with Debian's, so npm is installed only when no npm is there.
command -v npm > /dev/null || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
