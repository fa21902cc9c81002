// One whole decode step of a Falcon-shaped model on an emulated Wormhole mesh: every op of every
// layer and the LM head, each turned into device time by the same hardware figures as the
// attention model (mesh/wormhole_spec.h). Tensor parallel over the mesh's chips, as
// tt-metal's Falcon-40B runs on a T3000 (models/demos/t3000/falcon40b, the decode graph):
//
//   per layer, on every chip (N chips, U users padded to 32 rows, h = hidden, f = ffn):
//     all_gather   the residual [U, h] (each chip holds h / N columns), 1 link, ring
//     layernorm    ln_attn and ln_mlp on [U, h] (replicated)
//     qkv          [U, h] x [h, (q_heads + 2 kv_heads) / N x head_dim]
//     heads        create the heads, later concatenate them (data movement: launches)
//     rope         Q and K
//     kv_update    write this step's K and V rows into the caches
//     attention    FlashDecode over ctx cached positions (mesh/perf_model.h, unchanged), or
//                  the unfused TTNN path tt-metal's Falcon-40B decode still used
//     all_gather   the attention output [U, h]
//     dense        [U, h] x [h, h / N]
//     mlp          [U, h] x [h, f / N] (GELU fused) and [U, f / N] x [f / N, h]
//     reduce_scatter the MLP's partial sums [U, h] (unidirectional, as tt-metal's then was)
//     residual     two adds
//   once: embedding lookup; all_gather + final layer norm; lm_head [U, h] x [h, padded vocab / N]
//   (the padded, fractured LM head of seed 001).
// Weights stream from DRAM once per step at their tile format; matmuls take the larger of that
// and their Tensix compute. Collectives: meshmodel/collectives.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attention/flash_decode.h"
#include "meshmodel/op_costs.h"
#include "model/config.h"

namespace wc {

struct DecodeStepOptions {
  std::string mesh = "t3k";
  int users = 32;  // user rows decoded together (padded to 32 in tiles)
  int ctx = 128;   // cached positions each user attends
  TileFormat weights = TileFormat::kBFP8;
  // Per --weights group (model/weight_spec.h), instead of `weights`: QKV and dense, the MLP, the
  // LM head. Unset: `weights`.
  std::optional<TileFormat> attn_weights, mlp_weights, lm_head_weights;
  TileFormat kv = TileFormat::kBFP8;
  TileFormat activations = TileFormat::kBFP8;   // what the collectives carry
  MathFidelity fidelity = MathFidelity::kLoFi;  // the matmuls'
  bool unfused_attention = false;
  int lm_head_fractures = 8;  // seed 001's fracture_vocab_factor
  int eth_links = 1;          // Ethernet links per ring neighbour the collectives use
};

// One op (or a group of same-named ops) of the step.
struct StepOp {
  std::string name;  // "attention", "mlp", "all_gather", ...
  int per_step = 0;  // how many times a step runs it (all layers)
  double us = 0;     // all of them, per step
  double dram_us = 0, compute_us = 0, eth_us = 0, launch_us = 0;  // where `us` goes
};

struct DecodeStepEstimate {
  int chips = 1;
  std::vector<StepOp> ops;  // in graph order; the names are unique
  double step_us = 0;
  double tokens_per_s_per_user = 0;  // 1e6 / step_us
  double tokens_per_s = 0;           // users x that
  double dram_us = 0, compute_us = 0, eth_us = 0, launch_us = 0;
  double weight_bytes_per_chip = 0;  // read once per step
  double kv_bytes_per_chip = 0;      // read by attention per step
};

// The step of model `c` under `o`. Throws wc::Error for a mesh, shape or option the model cannot
// run (an unknown mesh, heads that do not split over the chips, users or ctx out of range).
DecodeStepEstimate EstimateDecodeStep(const FalconConfig& c, const DecodeStepOptions& o);

}  // namespace wc
