#include "model/weights.h"

#include <cstring>

#include "util/bf16.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

MatrixRef AsMatrix(const TensorInfo& t) {
  MatrixRef m;
  m.dtype = t.dtype;
  m.rows = t.shape[0];
  m.cols = m.row_stride = t.shape[1];
  m.data = t.data;
  return m;
}

std::vector<float> ToF32(const TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == DType::kF32) {
      std::memcpy(&out[i], t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = t.dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
    }
  }
  return out;
}

}  // namespace

void GatherRow(const MatrixRef& m, int64_t row, float* out) {
  const auto* base = static_cast<const uint8_t*>(m.data) + row * m.row_stride * DTypeSize(m.dtype);
  for (int64_t i = 0; i < m.cols; ++i) {
    if (m.dtype == DType::kF32) {
      std::memcpy(&out[i], base + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, base + 2 * i, 2);
      out[i] = m.dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
    }
  }
}

void FalconWeights::Embedding(int64_t token, float* out) const {
  if (lm_head_tied && !lm_head_p.empty()) return lm_head_p.Row(token, out);
  GatherRow(embeddings, token, out);
}

namespace {

PackedMatrix PackAndRelease(const MatrixRef& m, ActivationPrecision bf16_precision) {
  const int64_t row_bytes = m.row_stride * DTypeSize(m.dtype);
  return PackedMatrix::Pack(m, m.dtype == DType::kBF16 ? bf16_precision : ActivationPrecision::kF32,
                            [&](int64_t r0, int64_t r1) {
                              ReleaseMappedPages(
                                  static_cast<const uint8_t*>(m.data) + r0 * row_bytes,
                                  static_cast<size_t>((r1 - r0) * row_bytes));
                            });
}

}  // namespace

void FalconWeights::Pack(ActivationPrecision bf16_precision) {
  for (LayerWeights& l : layers) {
    l.qkv_p = PackAndRelease(l.qkv, bf16_precision);
    l.dense_p = PackAndRelease(l.dense, bf16_precision);
    l.fc1_p = PackAndRelease(l.fc1, bf16_precision);
    l.fc2_p = PackAndRelease(l.fc2, bf16_precision);
  }
  lm_head_p = PackAndRelease(lm_head, bf16_precision);
}

FalconWeights FalconWeights::Load(const FalconConfig& c, const std::string& dir) {
  FalconWeights w;
  w.checkpoint = Checkpoint::Open(dir);
  const Checkpoint& ck = *w.checkpoint;
  const int64_t h = c.hidden_size, ffn = c.ffn_hidden_size, qkv = c.qkv_rows();
  const int64_t attn_dim = static_cast<int64_t>(c.n_head) * c.head_dim();
  auto vec = [&](const std::string& name, int64_t n) { return ToF32(ck.Get(name, {n})); };
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) {
    return AsMatrix(ck.Get(name, {rows, cols}));
  };

  w.embeddings = mat("transformer.word_embeddings.weight", c.vocab_size, h);
  w.lm_head_tied = !ck.Has("lm_head.weight");
  if (!w.lm_head_tied) {
    w.lm_head = mat("lm_head.weight", c.vocab_size, h);
  } else if (!c.tie_word_embeddings) {
    throw Error(Cat(ck.source(),
                    ": missing tensor 'lm_head.weight' (config.json sets "
                    "tie_word_embeddings false)"));
  } else {
    w.lm_head = w.embeddings;
  }
  w.ln_f_w = vec("transformer.ln_f.weight", h);
  w.ln_f_b = vec("transformer.ln_f.bias", h);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = Cat("transformer.h.", l, ".");
    LayerWeights L;
    const std::string ln1 = c.two_layernorms() ? "ln_attn" : "input_layernorm";
    L.ln_attn_w = vec(p + ln1 + ".weight", h);
    L.ln_attn_b = vec(p + ln1 + ".bias", h);
    if (c.two_layernorms()) {
      L.ln_mlp_w = vec(p + "ln_mlp.weight", h);
      L.ln_mlp_b = vec(p + "ln_mlp.bias", h);
    } else if (!c.parallel_attn) {
      L.ln_mlp_w = vec(p + "post_attention_layernorm.weight", h);
      L.ln_mlp_b = vec(p + "post_attention_layernorm.bias", h);
    }
    L.qkv = mat(p + "self_attention.query_key_value.weight", qkv, h);
    L.dense = mat(p + "self_attention.dense.weight", h, attn_dim);
    L.fc1 = mat(p + "mlp.dense_h_to_4h.weight", ffn, h);
    L.fc2 = mat(p + "mlp.dense_4h_to_h.weight", h, ffn);
    if (c.bias) {
      L.qkv_b = vec(p + "self_attention.query_key_value.bias", qkv);
      L.dense_b = vec(p + "self_attention.dense.bias", h);
      L.fc1_b = vec(p + "mlp.dense_h_to_4h.bias", ffn);
      L.fc2_b = vec(p + "mlp.dense_4h_to_h.bias", h);
    }
    w.layers.push_back(std::move(L));
  }
  return w;
}

}  // namespace wc
