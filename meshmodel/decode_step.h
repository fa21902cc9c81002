// One whole step of a Falcon-shaped model on a Wormhole mesh, as tt-metal ran it: the program
// tt-metal measured (meshmodel/tt_graph.h: every device op of every layer, the collectives, the LM
// head) with each op priced by meshmodel/op_costs.h, summed as tt-metal's profiler sums them
// (device kernel time, op after op, no host). Tensor parallel over the mesh's chips: every chip
// runs the same ops on its share, the collectives join them.
//
// Without what-ifs the figures are those of the program, formats and clock of the runs that
// measured tt-metal's published device figures (one chip: Falcon-7B's program, bf16 KV cache;
// several: Falcon-40B's, BFP8_B KV; 800 MHz). What-ifs move one thing each: today's 1 GHz clock,
// DRAM-sharded weights, two Ethernet links, FlashDecode, other weight or KV formats.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "meshmodel/op_costs.h"
#include "meshmodel/tt_graph.h"
#include "model/config.h"

namespace wc {

struct DecodeStepOptions {
  std::string mesh = "t3k";
  TtPhase phase = TtPhase::kDecode;
  int users = 32;  // decode: user rows decoded together (a tile row holds 32); prefill: 1
  int ctx = 128;   // decode: cached positions each user attends; prefill: the prompt's tokens
  // Weight formats; per --weights group (model/weight_spec.h) instead of `weights`: QKV and
  // dense, the MLP, the LM head. Unset: `weights`.
  TileFormat weights = TileFormat::kBFP8;
  std::optional<TileFormat> attn_weights, mlp_weights, lm_head_weights;
  std::optional<TileFormat> kv;     // unset: the measured program's (bf16 on one chip, else bfp8)
  bool flash_decode = false;        // what-if: FlashDecode instead of matmul-softmax-matmul
  bool dram_sharded = false;        // what-if: weights sharded by DRAM bank
  bool op_floors_2025 = false;      // what-if: programs' fixed costs at 2025's floors
  std::optional<double> aiclk_ghz;  // what-if: another clock (unset: the measured runs' 0.8)
  int eth_links = 0;                // what-if: Ethernet links per ring neighbour (0: 1, measured)
  // what-if: token positions a user runs a step (a speculative verify step of k proposals: k + 1;
  // needs flash_decode). tokens_per_s_per_user stays steps a second: what a step yields is the
  // speculation what-if's (meshmodel/speculation.h).
  int tokens_per_user = 1;
  int lm_head_fractures = 8;  // seed 001's fracture_vocab_factor (pads the vocabulary)
  // what-if: the di/dt limit lifted, the 1 x 1 subblock matmuls at their largest subblocks
  // (TtGraphOptions::large_subblocks).
  bool large_subblocks = false;
};

// A group of same-named ops of the step ("qkv", "interleaved_to_sharded", "all_gather", ...).
struct StepOp {
  std::string name;
  std::string kind;  // TtOpKindName of its ops
  int per_step = 0;  // programs a step runs (all layers)
  double us = 0;     // all of them, per step
  double fixed_us = 0, dram_us = 0, compute_us = 0, noc_us = 0, eth_us = 0;  // where `us` goes
};

struct DecodeStepEstimate {
  std::string program;  // tt-metal's program the step follows (TtGraph::program)
  std::string graph;    // "measured" or the what-ifs applied
  int chips = 1;
  double aiclk_ghz = 0;
  TileFormat kv = TileFormat::kBF16;
  std::vector<StepOp> ops;  // in graph order; the names are unique
  int programs = 0;         // device programs a step runs
  double step_us = 0;
  TtPhase phase = TtPhase::kDecode;
  double tokens_per_s_per_user = 0;  // decode: 1e6 / step_us, a token a step (prefill: 0)
  double tokens_per_s = 0;           // decode: users x that; prefill: prompt tokens / step
  double fixed_us = 0, dram_us = 0, compute_us = 0, noc_us = 0, eth_us = 0;
  double weight_bytes_per_chip = 0;  // read once per step
  double kv_bytes_per_chip = 0;      // read by attention per step
};

// The step of model `c` under `o`. Throws wc::Error for a mesh, shape or option the model cannot
// run (an unknown mesh, heads that do not split over the chips, users or ctx out of range).
DecodeStepEstimate EstimateDecodeStep(const ModelConfig& c, const DecodeStepOptions& o);

// "measured", or the what-ifs `o` applies ("1 GHz, DRAM-sharded, ...").
std::string GraphLabel(const DecodeStepOptions& o);

}  // namespace wc
