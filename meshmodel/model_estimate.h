// The whole-model emulated decode time of the loaded model (meshmodel/decode_step.h), for the
// figures generate --stats and the chat show beside the attention op's.
#pragma once

#include <string>

#include "kernels/gemm/weight_format.h"
#include "kvcache/kv_cache.h"
#include "meshmodel/op_costs.h"
#include "model/decoder_model.h"

namespace wc {

// Microseconds one decode step of `model` (its KV cache in `kv_dtype`) takes on `mesh` for `users`
// rows at `ctx` cached positions: each --weights group (QKV and dense, MLP, LM head) in the tile
// format the loaded model holds it in (ModelTileFormat), its KV cache as bf16 tiles, or bfp8 for
// the host's quantized formats (int8, fp8, bfp8).
// The Wormhole tile format of a host weight format: bfp8 and bfp4 are BFP8_B and BFP4_B; f32, f16
// and bf16 run as bf16 tiles (Wormhole has no f32 matmul weights).
TileFormat ModelTileFormat(WeightFormat f);

// The graph the estimate assumes, for the figures' labels.
constexpr const char* kWholeModelGraph = "tt-metal's measured program";

double WholeModelUsPerToken(const DecoderModel& model, KVDType kv_dtype, const std::string& mesh,
                            int users, int ctx);

}  // namespace wc
