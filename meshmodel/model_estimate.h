// The whole-model emulated decode time of the loaded model (meshmodel/decode_step.h), for the
// figures generate --stats and the chat show beside the attention op's.
#pragma once

#include <string>

#include "kernels/gemm/format_table.h"
#include "kvcache/kv_cache.h"
#include "meshmodel/op_costs.h"
#include "model/decoder_model.h"

namespace wc {

// Microseconds one decode step of `model` (its KV cache in `kv_dtype`) takes on `mesh` for `users`
// rows at `ctx` cached positions: each --weights group (QKV and dense, MLP, LM head) in the tile
// format the loaded model holds it in (ModelTileFormat), its KV cache as bf16 tiles, or bfp8 for
// the host's quantized formats (int8, fp8, bfp8).
// The Wormhole tile format of a host weight format (format_table.h's mesh_tile): bfp8 and bfp4 are
// BFP8_B and BFP4_B; f32, f16 and bf16 run as bf16 tiles (Wormhole has no f32 matmul weights); a
// GGML type as the block float with at least its bits (Q8_0, Q5_*, Q6_K: BFP8_B; Q4_*: BFP4_B).
TileFormat ModelTileFormat(WeightFormat f);

// The graph the estimate assumes, for the figures' labels: tt-metal's measured program for the
// layouts it published (Falcon-7B/40B: RoPE, LayerNorm, GELU, parallel attention + MLP), else an
// estimate built from the same op costs (a gated MLP's extra matmul, a sequential layout's second
// norm; tt_graph_builder.h) for a model tt-metal publishes no figure of.
std::string WholeModelGraph(const ModelConfig& c);
// Whether WholeModelGraph is an estimate rather than tt-metal's measured program.
bool WholeModelIsEstimate(const ModelConfig& c);

double WholeModelUsPerToken(const DecoderModel& model, KVDType kv_dtype, const std::string& mesh,
                            int users, int ctx);

}  // namespace wc
