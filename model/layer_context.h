// What an architecture's layer graph (model/<arch>/<arch>_graph.cpp) sees of the model while one
// batch runs: the config, this rank's slice and the layer's weights, and the shared steps every
// architecture runs the same way - norms, interruptible matmuls, the K/V write, attention through
// the FlashDecode engine (or the reference), the tensor-parallel sum. A graph file reads top to
// bottom as the layer runs and holds no tensor-parallel branch: the steps below do the right thing
// for the whole model and for a rank's slice (model/partial_sums.h).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "kvcache/kv_cache.h"
#include "model/config.h"
#include "model/partial_sums.h"
#include "model/tensor_split.h"
#include "model/token_batch.h"
#include "model/weights.h"

namespace wc {

class DecoderModel;
class Rope;

struct LayerContext {
  const DecoderModel& model;
  const ModelConfig& config;
  const TensorSplit& split;  // this rank's heads and MLP width (the whole model's outside TP)
  const LayerWeights& w;
  int layer;
  const TokenBatch& batch;
  KVCache& cache;
  PartialSums& sums;

  int64_t n() const { return static_cast<int64_t>(batch.size()); }
  int64_t hidden() const { return config.hidden_size; }
  int64_t head_dim() const { return config.head_dim(); }

  // y[t] = norm(x[t]) for t < n: LayerNorm or RMSNorm as the config says.
  //   x, y: [n, hidden]
  void Norm(const NormWeights& norm, const float* x, int64_t n, float* y) const;
  // out [m, rows] = in [m, cols] W^T + b, polling the interrupt between slices of rows. For a
  // projection whose output is whole on every rank (QKV, gate, up).
  void MatMul(const float* in, int64_t m, const Linear& l, float* out) const;
  // MatMul of each projection of the same input (Llama's q, k, v; gate, up), as one GEMM group
  // (kernels/gemm/gemm_group.h: the input packed once, one dispatch): the same bits as one MatMul
  // each.  out of each: [m, its rows]
  void MatMuls(const float* in, int64_t m,
               std::initializer_list<std::pair<const Linear*, float*>> projections) const;
  // The same for a projection whose output is a rank's partial sum (attention output, down): its
  // bias is left to Sum on a rank.
  void MatMulPartial(const float* in, int64_t m, const Linear& l, float* out) const;
  // Tokens a call of an MLP that runs the batch in chunks (bounding its [chunk, ffn] activations,
  // a layer's largest buffers; the GEMM is batch-invariant, so no token's result changes): about
  // 128, the chunks balanced and each a whole number of `first`'s GEMM tiles (a tile is 6 tokens
  // on AVX2, 16 on AMX), so the batch takes as few tiles in chunks as in one call.
  int64_t MlpChunk(const Linear& first) const;
  // Rotary embedding of one head vector at `pos` (the model's theta and scaling).  x: [head_dim]
  void Rope(float* x, int pos) const;
  // Writes token t's K and V ([n_kv, head_dim] each, this rank's KV heads) to the cache; false
  // when a rank's write failed (the layer then skips its attention and goes on to the Sum).
  bool WriteKV(int64_t t, const float* k, const float* v) const;
  // attn [n, n_head, head_dim] = attention of q [n, n_head, head_dim] over each token's user row
  // (its cached K/V and its own), then the model's attention observer; nothing after a failed
  // write.
  void Attention(const float* q, float* attn) const;
  // out [n, hidden] = the ranks' sum of out, then + each bias (model/partial_sums.h).
  void Sum(std::vector<float>& out, std::initializer_list<const std::vector<float>*> biases) const {
    sums.Sum(out, biases);
  }
};

// An architecture's layer: x [n, hidden] += the layer's attention and MLP (its graph file).
using LayerGraph = void (*)(const LayerContext& ctx, std::vector<float>& x);
LayerGraph LayerGraphOf(Architecture arch);  // model/layer_graphs.cpp

}  // namespace wc
