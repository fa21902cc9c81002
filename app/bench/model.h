// `wormchat bench model`: prefill, decode and batched decode against the machine's bounds
// (app/bench/model.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace wc {

// Adds `model` under the `bench` subcommand.
void RegisterBenchModel(CLI::App* bench);

}  // namespace wc
