#include "mesh/model_estimate.h"

#include <algorithm>

#include "mesh/decode_step.h"

namespace wc {

double WholeModelUsPerToken(const FalconModel& model, KVDType kv_dtype, const std::string& mesh,
                            int users, int ctx) {
  DecodeStepOptions o;
  o.mesh = mesh;
  o.users = std::max(1, users);
  o.ctx = std::max(1, ctx);
  o.weights = TileFormat::kBF16;
  o.kv = IsQuantized(kv_dtype) ? TileFormat::kBFP8 : TileFormat::kBF16;
  o.activations = TileFormat::kBF16;
  o.fidelity = MathFidelity::kHiFi2;
  o.lm_head_fractures = model.options().lm_head_fractures;
  return EstimateDecodeStep(model.config(), o).step_us;
}

}  // namespace wc
