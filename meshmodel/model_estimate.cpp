#include "meshmodel/model_estimate.h"

#include <algorithm>

#include "meshmodel/decode_step.h"

namespace wc {

TileFormat ModelTileFormat(WeightFormat f) {
  return FormatRow(f).mesh_tile;
}

bool WholeModelIsEstimate(const ModelConfig& c) {
  return !LayoutDifferences(c).empty();
}

std::string WholeModelGraph(const ModelConfig& c) {
  const std::string differences = LayoutDifferences(c);
  return differences.empty()
             ? "tt-metal's measured program"
             : "an estimate for this layout (" + differences +
                   ") from tt-metal's Falcon op costs; no device figure to check it against";
}

double WholeModelUsPerToken(const DecoderModel& model, KVDType kv_dtype, const std::string& mesh,
                            int users, int ctx) {
  DecodeStepOptions o;
  o.mesh = mesh;
  o.users = std::clamp(users, 1, 32);
  o.ctx = std::clamp(ctx, 1, std::max(1, model.config().max_position_embeddings - 1));
  const ModelWeights& w = model.weights();
  o.weights = TileFormat::kBF16;
  o.attn_weights = ModelTileFormat(w.layers.front().attn_out.p.format());
  o.mlp_weights = ModelTileFormat(w.layers.front().down.p.format());
  o.lm_head_weights = ModelTileFormat(w.lm_head_p.format());
  o.kv = IsQuantized(kv_dtype) ? TileFormat::kBFP8 : TileFormat::kBF16;
  o.lm_head_fractures = model.options().lm_head_fractures;
  return EstimateDecodeStep(model.config(), o).step_us;
}

}  // namespace wc
