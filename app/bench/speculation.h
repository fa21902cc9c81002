// `bench model --speculate`: decode tokens/s of one row with speculative decoding against the same
// row without it, measured alternately in one run (issue 34). Proposers: prompt lookup, a draft
// model, or the oracle - the model's own continuation from the run without speculation, so every
// proposal is right, with --oracle-accept's share made wrong on purpose - which measures what the
// verify path costs and gains whatever the weights (random checkpoints never repeat their
// prompts). Workloads: --prompt-len random ids, or `extract` (a 400-token passage, then "Repeat
// the passage above:"), where prompt lookup's proposals can be right on a model that follows it.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/model_loader.h"
#include "serving/serving_loop.h"
#include "util/rng.h"

namespace wc {

struct BenchSpeculationOptions {
  std::string mode = "off";         // --speculate off|lookup|oracle|draft
  std::vector<int> ks = {4, 8};     // --speculate-k: each measured
  int lookup_ngram = 3;             // --lookup-ngram
  std::string draft_model;          // --draft-model
  double oracle_accept = 1.0;       // --oracle-accept: the share of oracle proposals left right
  std::string workload = "random";  // --workload random|extract
  bool print_workload = false;      // --print-workload: print the extract prompt as text, exit
  bool on() const { return mode != "off"; }
  bool NeedsTokenizer() const { return workload == "extract" || print_workload; }
};

// Registers the flags on `bench model`; bad values are one-line errors naming the flag.
void AddBenchSpeculationOptions(CLI::App* cmd, BenchSpeculationOptions& s);
// After parsing: --draft-model alone implies --speculate draft; a draft mode without it, or
// --oracle-accept/--draft-model with another mode, is a one-line error. Before anything loads.
void CheckBenchSpeculation(const CLI::App& cmd, BenchSpeculationOptions& s);

// The passage `--workload extract` asks to repeat: [bos] + passage (up to 400 tokens) + the
// instruction, framed as a chat turn when the model has a chat format.
std::vector<int> ExtractPrompt(const LoadedModel& m);
// The same prompt as text (its BOS, if any, left out, and sentencepiece's leading space), for
// giving another program the same prompt.
std::string ExtractPromptText(const LoadedModel& m);

// Runs the comparison on row 0 of `loop` (greedy, EOS ignored, gen_len new tokens, `repeats`
// alternating runs per k, medians), prints it and adds "speculation" to `out`. Throws wc::Error if
// a run with speculation gives other tokens than the run without (the contract broken).
// user_rows: the loop's (a draft model keeps a row for each).
void RunBenchSpeculation(const BenchSpeculationOptions& s, const ModelRunOptions& run,
                         const LoadedModel& m, ServingLoop& loop, int user_rows, int prompt_len,
                         int gen_len, int repeats, Rng& rng, nlohmann::json* out);

}  // namespace wc
