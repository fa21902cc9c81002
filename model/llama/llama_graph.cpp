// One Llama decoder layer (HF modeling_llama.py's LlamaDecoderLayer), as it runs:
//   x += o_proj(attn(rope(q_proj(h)), rope(k_proj(h)), v_proj(h))),  h = input_layernorm(x)
//   x += down_proj(silu(gate_proj(m)) * up_proj(m)),                 m =
//   post_attention_layernorm(x)
// RMSNorms, grouped KV heads (query head h reads KV head h / (n_head / n_kv)), rotate-half RoPE
// with the config's theta and scaling.
#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "model/layer_context.h"
#include "model/llama/llama.h"

namespace wc::llama {

void Layer(const LayerContext& ctx, std::vector<float>& x) {
  const LayerWeights& w = ctx.w;
  const int64_t n = ctx.n(), hidden = ctx.hidden(), hd = ctx.head_dim();
  const int n_head = ctx.split.n_head(), n_kv = ctx.split.n_kv_heads();
  const int64_t q_dim = int64_t{n_head} * hd, kv_dim = int64_t{n_kv} * hd;

  // Attention block.  h: [n, hidden]
  std::vector<float> h(x.size());
  ctx.Norm(w.attn_norm, x.data(), n, h.data());
  std::vector<float> q(static_cast<size_t>(n * q_dim));   // [n, n_head, head_dim]
  std::vector<float> k(static_cast<size_t>(n * kv_dim));  // [n, n_kv, head_dim]
  std::vector<float> v(k.size());                         // [n, n_kv, head_dim]
  ctx.MatMuls(h.data(), n, {{&w.q, q.data()}, {&w.k, k.data()}, {&w.v, v.data()}});
  for (int64_t t = 0; t < n; ++t) {
    const int pos = ctx.batch.positions[t];
    for (int i = 0; i < n_head; ++i) ctx.Rope(&q[(t * n_head + i) * hd], pos);
    for (int g = 0; g < n_kv; ++g) ctx.Rope(&k[(t * n_kv + g) * hd], pos);
    if (!ctx.WriteKV(t, &k[t * kv_dim], &v[t * kv_dim])) break;
  }
  std::vector<float>().swap(k);
  std::vector<float>().swap(v);
  std::vector<float> attn(static_cast<size_t>(n * q_dim));  // [n, n_head, head_dim]
  ctx.Attention(q.data(), attn.data());
  std::vector<float>().swap(q);
  std::vector<float> out(x.size());  // [n, hidden]
  ctx.MatMulPartial(attn.data(), n, w.attn_out, out.data());
  std::vector<float>().swap(attn);
  ctx.Sum(out, {&w.attn_out.b});
  for (size_t i = 0; i < x.size(); ++i) x[i] += out[i];

  // MLP block, in chunks of tokens: bounds the [tokens, ffn] activations (the largest buffers)
  // without changing any token's result (the GEMM is batch-invariant).
  ctx.Norm(w.mlp_norm, x.data(), n, h.data());
  const int64_t chunk = ctx.MlpChunk(w.gate);
  const int64_t ffn = ctx.split.ffn();
  std::vector<float> gate(static_cast<size_t>(std::min(n, chunk) * ffn));  // [chunk, ffn]
  std::vector<float> up(gate.size());                                      // [chunk, ffn]
  for (int64_t t0 = 0; t0 < n; t0 += chunk) {
    const int64_t m = std::min(chunk, n - t0);
    ctx.MatMuls(&h[t0 * hidden], m, {{&w.gate, gate.data()}, {&w.up, up.data()}});
    SiluMul(gate.data(), up.data(), m * ffn);
    ctx.MatMulPartial(gate.data(), m, w.down, &out[t0 * hidden]);
  }
  ctx.Sum(out, {&w.down.b});
  for (size_t i = 0; i < x.size(); ++i) x[i] += out[i];
}

}  // namespace wc::llama
