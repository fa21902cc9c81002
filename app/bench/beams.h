// `wormchat bench beams`: beam requests of W = 1, 2, 4, 8 through the serving loop, their speed
// and the KV bytes their shared prompt saves (issue 13; app/bench/beams.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace wc {

// Adds `beams` under the `bench` subcommand.
void RegisterBenchBeams(CLI::App* bench);

}  // namespace wc
