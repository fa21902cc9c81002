// `wormchat mesh-bench --experiment falcon40b-decode`: the whole decode step of a Falcon-shaped
// model on an emulated Wormhole mesh (meshmodel/decode_step.h): per-op time, per-token latency,
// tokens/s per user and in total, the DRAM / compute / Ethernet / launch shares, what-ifs, the
// comparison with tt-metal's published Falcon-40B figure; CSV, stacked-bar PNG, JSON.
#pragma once

#include <string>

#include "meshmodel/decode_step.h"

namespace wc {

struct DecodeStepCmdOptions {
  std::string model_dir;  // --model (a checkpoint's config.json), else --preset
  std::string preset;     // --preset (default falcon-40b)
  DecodeStepOptions step;
  std::string weights_dtype = "bfp8", kv_dtype = "bfp8", attention = "flash";
  bool formats_given = false;  // any of --model, --preset, --weights-dtype, --kv-dtype given
  std::string csv, plot, json;
};

void RunDecodeStepExperiment(DecodeStepCmdOptions o);

}  // namespace wc
