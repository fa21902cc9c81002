// `wormchat bench attention`: the host FlashDecode engine's time per KV-cache format against the
// machine's read bandwidth and against bf16 (app/bench/attention.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace wc {

// Adds `attention` under the `bench` subcommand.
void RegisterBenchAttention(CLI::App* bench);

}  // namespace wc
