// `wormchat bench tokenizer`: single-thread encoding speed of a model's tokenizer (sentencepiece
// or Hugging Face tokenizer.json) on a text file, in MB/s and tokens/s (issue 17;
// app/bench/tokenizer.cpp). tools/tokenizer/hf_bench.mjs measures HF's own library on the same
// file for comparison.
#pragma once

#include <CLI/CLI.hpp>

namespace wc {

// Adds `tokenizer` under the `bench` subcommand.
void RegisterBenchTokenizer(CLI::App* bench);

}  // namespace wc
