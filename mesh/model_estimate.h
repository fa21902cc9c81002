// The whole-model emulated decode time of the loaded model (mesh/decode_step.h), for the
// figures generate --stats and the chat show beside the attention op's.
#pragma once

#include <string>

#include "kvcache/kv_cache.h"
#include "model/falcon.h"

namespace wc {

// Microseconds one decode step of `model` (its KV cache in `kv_dtype`) takes on `mesh` for `users`
// rows at `ctx` cached positions: its weights as bf16 tiles (Wormhole has no f32 matmul weights;
// F32 and F16 checkpoints run as bf16), its KV cache as bf16 tiles, or bfp8 for the host's
// quantized formats (int8, fp8, bfp8).
double WholeModelUsPerToken(const FalconModel& model, KVDType kv_dtype, const std::string& mesh,
                            int users, int ctx);

}  // namespace wc
