// One Falcon decoder layer (HF modeling_falcon.py's FalconDecoderLayer), as it runs:
//   parallel (7B/40B/180B):  x += dense(attn(ln_attn(x))) + mlp(ln_mlp(x) or ln_attn(x))
//   sequential:              x += dense(attn(input_layernorm(x)));
//                            x += mlp(post_attention_layernorm(x))
// with the fused QKV split into heads, RoPE on q and k (none for ALiBi, Falcon-RW: its bias is
// added inside attention, attention/alibi.h), and the exact-GELU MLP.
#include <cstring>

#include "kernels/ops.h"
#include "model/falcon/falcon.h"
#include "model/layer_context.h"

namespace wc::falcon {
namespace {

// Row offsets (in values) of query head h, and of K and V of KV head g, within one token's fused
// query_key_value output (HF FalconAttention._split_heads), for a rank's heads.
struct QkvIndex {
  QkvLayout layout;
  int n_head, n_kv, head_dim, q_per_kv;
  int64_t Q(int h) const {
    switch (layout) {
      case QkvLayout::kGrouped:
        return (static_cast<int64_t>(h / q_per_kv) * (q_per_kv + 2) + h % q_per_kv) * head_dim;
      case QkvLayout::kMultiQuery:
        return static_cast<int64_t>(h) * head_dim;
      case QkvLayout::kMultiHead:
        return static_cast<int64_t>(3 * h) * head_dim;
    }
    return 0;
  }
  int64_t K(int g) const {
    switch (layout) {
      case QkvLayout::kGrouped:
        return (static_cast<int64_t>(g) * (q_per_kv + 2) + q_per_kv) * head_dim;
      case QkvLayout::kMultiQuery:
        return static_cast<int64_t>(n_head) * head_dim;
      case QkvLayout::kMultiHead:
        return static_cast<int64_t>(3 * g + 1) * head_dim;
    }
    return 0;
  }
  int64_t V(int g) const { return K(g) + head_dim; }
};

// The MLP in chunks of tokens: bounds the [tokens, ffn] activation (the largest buffer) without
// changing any token's result (the GEMM is batch-invariant).  in, out: [n, hidden]
void Mlp(const LayerContext& ctx, const std::vector<float>& in, std::vector<float>& out) {
  const int64_t chunk = ctx.MlpChunk(ctx.w.up);
  const int64_t n = ctx.n(), hidden = ctx.hidden(), ffn = ctx.split.ffn();
  out.resize(static_cast<size_t>(n * hidden));
  std::vector<float> h4(static_cast<size_t>(std::min(n, chunk) * ffn));  // [chunk, ffn]
  for (int64_t t0 = 0; t0 < n; t0 += chunk) {
    const int64_t m = std::min(chunk, n - t0);
    ctx.MatMul(&in[t0 * hidden], m, ctx.w.up, h4.data());
    GeluErf(h4.data(), m * ffn);
    ctx.MatMulPartial(h4.data(), m, ctx.w.down, &out[t0 * hidden]);
  }
}

}  // namespace

void Layer(const LayerContext& ctx, std::vector<float>& x) {
  const ModelConfig& c = ctx.config;
  const LayerWeights& w = ctx.w;
  const int64_t n = ctx.n(), hd = ctx.head_dim();
  const int n_head = ctx.split.n_head(), n_kv = ctx.split.n_kv_heads();
  const int64_t qkv_rows = w.qkv.w.rows, attn_dim = static_cast<int64_t>(n_head) * hd;
  const QkvIndex idx{c.qkv_layout(), n_head, n_kv, static_cast<int>(hd), n_head / n_kv};

  // Norms of the residual stream.  xa, xm: [n, hidden]
  std::vector<float> xa(x.size()), xm;
  ctx.Norm(w.attn_norm, x.data(), n, xa.data());
  if (c.two_layernorms()) {
    xm.resize(x.size());
    ctx.Norm(w.mlp_norm, x.data(), n, xm.data());
  }

  // Fused QKV projection, split into heads, RoPE on q and k, K/V written to the cache.
  std::vector<float> qkv(static_cast<size_t>(n * qkv_rows));  // [n, qkv_rows]
  ctx.MatMul(xa.data(), n, w.qkv, qkv.data());
  std::vector<float> q(static_cast<size_t>(n * attn_dim));            // [n, n_head, head_dim]
  std::vector<float> k(static_cast<size_t>(n_kv * hd)), v(k.size());  // [n_kv, head_dim]
  for (int64_t t = 0; t < n; ++t) {
    const float* row = &qkv[t * qkv_rows];
    const int pos = ctx.batch.positions[t];
    for (int h = 0; h < n_head; ++h) {
      float* qh = &q[(t * n_head + h) * hd];
      std::memcpy(qh, row + idx.Q(h), static_cast<size_t>(hd) * sizeof(float));
      if (!c.alibi) ctx.Rope(qh, pos);
    }
    for (int g = 0; g < n_kv; ++g) {
      std::memcpy(&k[g * hd], row + idx.K(g), static_cast<size_t>(hd) * sizeof(float));
      std::memcpy(&v[g * hd], row + idx.V(g), static_cast<size_t>(hd) * sizeof(float));
      if (!c.alibi) ctx.Rope(&k[g * hd], pos);
    }
    if (!ctx.WriteKV(t, k.data(), v.data())) break;
  }
  std::vector<float>().swap(qkv);

  // Attention over each token's row, and the dense projection.
  std::vector<float> attn(static_cast<size_t>(n * attn_dim));  // [n, n_head, head_dim]
  ctx.Attention(q.data(), attn.data());
  std::vector<float>().swap(q);
  std::vector<float> attn_out(x.size());  // [n, hidden]
  ctx.MatMulPartial(attn.data(), n, w.attn_out, attn_out.data());
  std::vector<float>().swap(attn);

  std::vector<float> mlp_out;  // [n, hidden]
  if (c.parallel_attn) {  // x += attn + mlp, one sum of both a layer (seed 001's one all-reduce)
    if (c.two_layernorms()) std::vector<float>().swap(xa);
    Mlp(ctx, c.two_layernorms() ? xm : xa, mlp_out);
    for (size_t i = 0; i < x.size(); ++i) mlp_out[i] += attn_out[i];
    ctx.Sum(mlp_out, {&w.attn_out.b, &w.down.b});
    for (size_t i = 0; i < x.size(); ++i) x[i] = mlp_out[i] + x[i];
  } else {  // sequential: x += attn; x += mlp(post_attention_layernorm(x))
    ctx.Sum(attn_out, {&w.attn_out.b});
    for (size_t i = 0; i < x.size(); ++i) x[i] += attn_out[i];
    std::vector<float>().swap(xa);
    xm.resize(x.size());
    ctx.Norm(w.mlp_norm, x.data(), n, xm.data());
    Mlp(ctx, xm, mlp_out);
    ctx.Sum(mlp_out, {&w.down.b});
    for (size_t i = 0; i < x.size(); ++i) x[i] = mlp_out[i] + x[i];
  }
}

}  // namespace wc::falcon
