// `wormchat mesh-bench --experiment falcon40b-decode`: the whole decode step of a Falcon-shaped
// model on an emulated Wormhole mesh (meshmodel/decode_step.h): per-op time, per-token latency,
// tokens/s per user and in total, the DRAM / compute / Ethernet / launch shares, what-ifs, the
// comparison with tt-metal's published Falcon-40B figure; CSV, stacked-bar PNG, JSON.
#pragma once

#include <string>
#include <vector>

#include "meshmodel/decode_step.h"

namespace wc {

struct DecodeStepCmdOptions {
  std::string model_dir;  // --model (a checkpoint's config.json), else --preset
  std::string preset;     // --preset (default falcon-40b)
  DecodeStepOptions step;
  std::string weights_dtype = "bfp8", kv_dtype, attention = "unfused", phase = "decode";
  bool users_given = false;    // --users given (prefill defaults to 1)
  bool formats_given = false;  // any of --model, --preset, --weights-dtype, --kv-dtype given
  std::string csv, plot, json;
};

void RunDecodeStepExperiment(DecodeStepCmdOptions o);

// A what-if: the step with one change.
struct Scenario {
  std::string label;
  DecodeStepOptions options;
};
// The changes today's tt-metal makes (or could make) to the measured program, one each, and all
// of them together: 800 MHz (the clock before 2024-05), DRAM-sharded weights, programs' fixed
// costs at 2025's floors, 2 Ethernet links
// (nothing on one chip), BFP4_B MLP weights, FlashDecode.
std::vector<Scenario> TodaysWhatIfs(const DecodeStepOptions& base);

}  // namespace wc
