// `wormchat bench serve`: the serving loop under synthetic load (app/bench/serve.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace wc {

// Adds `serve` under the `bench` subcommand.
void RegisterBenchServe(CLI::App* bench);

}  // namespace wc
