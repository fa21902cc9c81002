#include "model/falcon.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "attention/reference_attention.h"
#include "kernels/gemm/gemm.h"
#include "model/partial_sums.h"
#include "util/error.h"

namespace wc {
namespace {

const float* OrNull(const std::vector<float>& v) {
  return v.empty() ? nullptr : v.data();
}

void PollInterrupt(const FalconModel::Interrupt& interrupted) {
  if (interrupted && interrupted()) throw PartialSums::Interrupted{};
}

// Gemm(x, n_tokens, w, bias, y) in slices of output rows of about slice_macs multiply-adds each,
// polling `interrupted` between slices: a few milliseconds of work at most between polls. Results
// are those of one Gemm call (a row's output never depends on the row range).
//   x: [n_tokens, w.cols()]   y: [n_tokens, w.rows()]
void InterruptibleMatMul(const float* x, int64_t n_tokens, const PackedMatrix& w, const float* bias,
                         float* y, const FalconModel::Interrupt& interrupted, int64_t slice_macs) {
  const int64_t rows = w.rows(), panel = PackedMatrix::kPanelRows;
  const int64_t macs_per_row = std::max<int64_t>(1, n_tokens * w.cols());
  int64_t slice = interrupted ? std::max<int64_t>(panel, slice_macs / macs_per_row) : rows;
  slice = (slice + panel - 1) / panel * panel;  // whole panels
  const GemmInput in = PackGemmInput(x, n_tokens, w.cols(), w);
  for (int64_t r0 = 0; r0 < rows; r0 += slice) {
    PollInterrupt(interrupted);
    Gemm(in, w, bias, y + r0, rows, r0, std::min(rows, r0 + slice));  // y[t, r0:]
  }
}

// Row offsets (in values) of query head h, and of K and V of KV head g, within one token's fused
// query_key_value output (HF FalconAttention._split_heads).
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

// The weights with their matrices packed for the GEMM kernels, after the cheap option checks.
FalconWeights Packed(FalconWeights w, const ModelOptions& options) {
  if (w.split.whole()) FracturedLMHead::PaddedVocab(w.lm_head.rows, options.lm_head_fractures);
  w.Pack(options.matmul_precision, options.weights, options.pack_progress);
  return w;
}

}  // namespace

std::unique_ptr<FalconModel> FalconModel::Load(const std::string& dir,
                                               const ModelOptions& options) {
  FalconConfig config = LoadConfig(dir);
  const Communicator* group = options.tensor_group;
  const TensorSplit split = group == nullptr ? TensorSplit::Whole(config, options.lm_head_fractures)
                                             : TensorSplit::Make(config, options.lm_head_fractures,
                                                                 group->rank(), group->size());
  // A converted checkpoint's block-float groups load as stored (model/converted_checkpoint.h).
  const WeightSpec spec = EffectiveWeightSpec(ReadStoredWeightFormats(dir), options.weights, dir);
  if (group != nullptr) CheckBfpSlices(config, options.lm_head_fractures, group->size(), spec);
  FalconWeights weights = FalconWeights::Load(config, dir, split);
  ModelOptions resolved = options;  // options().weights names what is held
  resolved.weights = spec;
  return std::make_unique<FalconModel>(config, std::move(weights), resolved);
}

FalconModel::FalconModel(const FalconConfig& config, FalconWeights weights,
                         const ModelOptions& options)
    : options_(options),
      config_(config),
      weights_(Packed(std::move(weights), options)),
      lm_head_(weights_.lm_head_p, weights_.split.whole() ? options.lm_head_fractures : 1),
      rope_(config.head_dim(), config.rope_theta),
      engine_(MeshPreset(options.mesh), options.flash) {
  if (tensor_parallel() && options.tensor_group->rank() == 0)
    leader_ = std::make_unique<TensorParallelLeader>(*options.tensor_group);
  options_.pack_progress = nullptr;  // packing is done; what it captured may not outlive the load
}

std::string FalconModel::Fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  auto mix = [&h](const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  };
  const std::string cfg = config_.ToJson().dump();
  mix(cfg.data(), cfg.size());
  const size_t bytes = weights_.checkpoint->total_bytes();
  mix(&bytes, sizeof bytes);
  const MatrixRef& e = weights_.embeddings;
  mix(e.data, static_cast<size_t>(std::min<int64_t>(e.rows, 64) * e.cols * DTypeSize(e.dtype)));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

KVCacheShape FalconModel::CacheShape(int user_rows, int max_seq) const {
  KVCacheShape s;
  s.n_layers = config_.n_layers;
  s.user_rows = user_rows;
  s.n_kv_heads = split().n_kv_heads();
  s.max_seq = max_seq;
  s.head_dim = config_.head_dim();
  return s;
}

bool FalconModel::Forward(const TokenBatch& batch, KVCache& cache, std::vector<float>* logits,
                          const Interrupt& interrupted) const {
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t hidden = config_.hidden_size;
  WC_CHECK(batch.user_rows.size() == batch.tokens.size() &&
               batch.positions.size() == batch.tokens.size(),
           "ragged batch");
  for (int64_t i = 0; i < n; ++i) {
    if (batch.tokens[i] < 0 || batch.tokens[i] >= config_.vocab_size)
      throw Error(Cat("token id ", batch.tokens[i], " is outside the vocabulary [0, ",
                      config_.vocab_size, ")"));
    if (batch.positions[i] < 0 || batch.positions[i] >= cache.shape().max_seq)
      throw Error(Cat("position ", batch.positions[i], " is beyond the context of ",
                      cache.shape().max_seq, " tokens; raise --ctx or shorten the input"));
    WC_CHECK(batch.user_rows[i] >= 0 && batch.user_rows[i] < cache.shape().user_rows, "user row");
  }
  if (leader_) leader_->Announce(batch, cache);  // the other ranks run this pass with rank 0
  std::vector<float> x(static_cast<size_t>(n * hidden));  // [n, hidden] residual stream
  for (int64_t i = 0; i < n; ++i) weights_.Embedding(batch.tokens[i], &x[i * hidden]);
  PartialSums sums(tensor_parallel() ? options_.tensor_group : nullptr, interrupted);
  try {
    for (int l = 0; l < config_.n_layers; ++l) {
      sums.Poll();
      Layer(l, batch, cache, x, sums);
    }
    sums.Poll();
  } catch (const PartialSums::Interrupted&) {
    return false;
  }

  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  std::vector<float> normed(static_cast<size_t>(n_out * hidden));  // [n_out, hidden]
  for (int64_t r = 0; r < n_out; ++r)
    LayerNorm(&x[batch.logit_rows[r] * hidden], weights_.ln_f_w.data(), weights_.ln_f_b.data(),
              config_.layer_norm_epsilon, &normed[r * hidden], hidden);
  logits->assign(static_cast<size_t>(n_out * config_.vocab_size), 0.0f);
  if (tensor_parallel())
    GatheredLogits(normed.data(), n_out, logits->data());
  else if (n_out > 0)
    lm_head_.Compute(normed.data(), n_out, logits->data());
  return true;
}

void FalconModel::GatheredLogits(const float* normed, int64_t n_out, float* logits) const {
  Communicator& group = *options_.tensor_group;
  const int ranks = group.size();
  const int fractures = options_.lm_head_fractures;
  const int64_t per_rank =  // rows of every rank's fractures, padding included
      FracturedLMHead::PaddedVocab(config_.vocab_size, fractures) / fractures * (fractures / ranks);
  const int64_t mine = weights_.lm_head_p.rows();
  std::vector<float> part(static_cast<size_t>(n_out * per_rank), 0.0f);  // [n_out, per_rank]
  if (n_out > 0 && mine > 0) {
    std::vector<float> local(static_cast<size_t>(n_out * mine));  // [n_out, mine]
    lm_head_.Compute(normed, n_out, local.data());
    for (int64_t t = 0; t < n_out; ++t)
      std::memcpy(&part[t * per_rank], &local[t * mine], static_cast<size_t>(mine) * sizeof(float));
  }
  std::vector<float> all(part.size() * static_cast<size_t>(ranks));  // [ranks, n_out, per_rank]
  group.AllGather(part.data(), part.size() * sizeof(float), all.data());
  const int64_t vocab = config_.vocab_size;
  for (int r = 0; r < ranks; ++r) {
    const TensorSplit s = TensorSplit::Make(config_, fractures, r, ranks);
    const int64_t rows = s.vocab_end - s.vocab_begin;
    for (int64_t t = 0; t < n_out; ++t)
      std::memcpy(logits + t * vocab + s.vocab_begin, &all[(r * n_out + t) * per_rank],
                  static_cast<size_t>(rows) * sizeof(float));
  }
}

void FalconModel::Layer(int l, const TokenBatch& batch, KVCache& cache, std::vector<float>& x,
                        PartialSums& sums) const {
  const FalconConfig& c = config_;
  const LayerWeights& w = weights_.layers[l];
  const int64_t n = static_cast<int64_t>(batch.size());
  // This rank's heads and MLP width (the whole model's outside tensor parallel).
  const TensorSplit& split = weights_.split;
  const int64_t hidden = c.hidden_size, hd = c.head_dim(), ffn = split.ffn();
  const int n_head = split.n_head(), n_kv = split.n_kv_heads(), q_per_kv = n_head / n_kv;
  const int64_t qkv_rows = w.qkv.rows, attn_dim = static_cast<int64_t>(n_head) * hd;
  const QkvIndex idx{c.qkv_layout(), n_head, n_kv, static_cast<int>(hd), q_per_kv};
  const int64_t slice_macs = options_.interrupt_slice_macs;
  auto matmul = [&](const float* in, int64_t m, const PackedMatrix& wp, const float* bias,
                    float* out) {
    InterruptibleMatMul(in, m, wp, bias, out, sums.matmul_interrupt(), slice_macs);
  };

  // LayerNorms of the residual stream.  xa, xm: [n, hidden]
  std::vector<float> xa(x.size()), xm;
  for (int64_t t = 0; t < n; ++t)
    LayerNorm(&x[t * hidden], w.ln_attn_w.data(), w.ln_attn_b.data(), c.layer_norm_epsilon,
              &xa[t * hidden], hidden);
  if (c.two_layernorms()) {
    xm.resize(x.size());
    for (int64_t t = 0; t < n; ++t)
      LayerNorm(&x[t * hidden], w.ln_mlp_w.data(), w.ln_mlp_b.data(), c.layer_norm_epsilon,
                &xm[t * hidden], hidden);
  }

  // Fused QKV projection, split into heads, RoPE on q and k, K/V written to the cache.
  std::vector<float> qkv(static_cast<size_t>(n * qkv_rows));  // [n, qkv_rows]
  matmul(xa.data(), n, w.qkv_p, OrNull(w.qkv_b), qkv.data());
  std::vector<float> q(static_cast<size_t>(n * attn_dim));            // [n, n_head, head_dim]
  std::vector<float> k(static_cast<size_t>(n_kv * hd)), v(k.size());  // [n_kv, head_dim]
  for (int64_t t = 0; t < n; ++t) {
    const float* row = &qkv[t * qkv_rows];
    const int pos = batch.positions[t];
    for (int h = 0; h < n_head; ++h) {
      float* qh = &q[(t * n_head + h) * hd];
      std::memcpy(qh, row + idx.Q(h), static_cast<size_t>(hd) * sizeof(float));
      rope_.Apply(qh, pos);
    }
    for (int g = 0; g < n_kv; ++g) {
      std::memcpy(&k[g * hd], row + idx.K(g), static_cast<size_t>(hd) * sizeof(float));
      std::memcpy(&v[g * hd], row + idx.V(g), static_cast<size_t>(hd) * sizeof(float));
      rope_.Apply(&k[g * hd], pos);
    }
    if (!sums.TryWrite([&] { cache.Write(l, batch.user_rows[t], pos, k.data(), v.data()); })) break;
  }

  std::vector<float>().swap(qkv);
  std::vector<float> attn(static_cast<size_t>(n * attn_dim));  // [n, n_head, head_dim]
  if (!sums.failed()) Attention(l, batch, cache, q.data(), attn.data());
  std::vector<float>().swap(q);
  if (observer_) observer_(l, attn.data(), n);
  std::vector<float> attn_out(x.size());  // [n, hidden]
  matmul(attn.data(), n, w.dense_p, sums.OwnBias(w.dense_b), attn_out.data());
  std::vector<float>().swap(attn);

  // The MLP in chunks of tokens: bounds the [tokens, ffn_hidden] activation (the largest buffer)
  // without changing any token's result (MatMul is batch-invariant).
  constexpr int64_t kMlpChunk = 128;
  auto mlp = [&](const std::vector<float>& in, std::vector<float>& out) {
    out.resize(x.size());
    std::vector<float> h4(static_cast<size_t>(std::min(n, kMlpChunk) * ffn));  // [chunk, ffn]
    for (int64_t t0 = 0; t0 < n; t0 += kMlpChunk) {
      const int64_t m = std::min(kMlpChunk, n - t0);
      matmul(&in[t0 * hidden], m, w.fc1_p, OrNull(w.fc1_b), h4.data());
      GeluErf(h4.data(), m * ffn);
      matmul(h4.data(), m, w.fc2_p, sums.OwnBias(w.fc2_b), &out[t0 * hidden]);
    }
  };
  std::vector<float> mlp_out;  // [n, hidden]
  if (c.parallel_attn) {  // x += attn + mlp, one sum of both a layer (seed 001's one all-reduce)
    if (c.two_layernorms()) std::vector<float>().swap(xa);
    mlp(c.two_layernorms() ? xm : xa, mlp_out);
    for (size_t i = 0; i < x.size(); ++i) mlp_out[i] += attn_out[i];
    sums.Sum(mlp_out, {&w.dense_b, &w.fc2_b});
    for (size_t i = 0; i < x.size(); ++i) x[i] = mlp_out[i] + x[i];
  } else {  // sequential: x += attn; x += mlp(post_attention_layernorm(x))
    sums.Sum(attn_out, {&w.dense_b});
    for (size_t i = 0; i < x.size(); ++i) x[i] += attn_out[i];
    std::vector<float>().swap(xa);
    xm.resize(x.size());
    for (int64_t t = 0; t < n; ++t)
      LayerNorm(&x[t * hidden], w.ln_mlp_w.data(), w.ln_mlp_b.data(), c.layer_norm_epsilon,
                &xm[t * hidden], hidden);
    mlp(xm, mlp_out);
    sums.Sum(mlp_out, {&w.fc2_b});
    for (size_t i = 0; i < x.size(); ++i) x[i] = mlp_out[i] + x[i];
  }
}

void FalconModel::Attention(int l, const TokenBatch& batch, const KVCache& cache, const float* q,
                            float* attn) const {
  const int64_t n = static_cast<int64_t>(batch.size());
  const int n_head = split().n_head(), n_kv = split().n_kv_heads(), q_per_kv = n_head / n_kv;
  const int64_t hd = config_.head_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (options_.attention == AttentionImpl::kFlashDecode) {
    // Seed 001 split: each token attends its row's cached positions [0, pos) and, as a second
    // part merged at the end, its own K/V (already written at pos, so prefill and decode agree).
    // Consecutive tokens of one user row at consecutive positions (a prompt chunk, a verify chunk)
    // are one user of the op with several queries: its cached K/V is read once for all of them,
    // and each query's numbers are those it gets alone (attention/flash_decode.h).
    std::vector<int32_t> users, cur_pos, q_len, zeros;  // [groups]
    for (int64_t t = 0; t < n; ++t) {
      if (t > 0 && batch.user_rows[t] == batch.user_rows[t - 1] &&
          batch.positions[t] == batch.positions[t - 1] + 1) {
        ++q_len.back();
        continue;
      }
      users.push_back(batch.user_rows[t]);
      cur_pos.push_back(batch.positions[t] - 1);
      q_len.push_back(1);
      zeros.push_back(0);
    }
    const KVCacheLayerView cached(cache, l, users.data(), zeros.data());
    const KVCacheLayerView own(cache, l, batch.user_rows.data(), batch.positions.data());
    DecodeAttentionOp op;
    op.bsz = static_cast<int>(users.size());
    op.n_q_heads = n_head;
    op.n_kv_heads = n_kv;
    op.head_dim = static_cast<int>(hd);
    op.kv_len = cache.shape().max_seq;
    op.q = q;
    op.kv = &cached;
    op.cur_pos = cur_pos.data();
    op.q_len = q_len.data();
    op.new_kv = &own;
    op.scale = scale;
    op.out = attn;
    const OpTrace trace = engine_.Run(op);
    if (flash_observer_)
      flash_observer_->OnFlashDecode({l, op, trace, engine_.mesh(), options_.flash});
    return;
  }
  // Reference (the oracle): each (token, KV group) over its row's positions [0, pos], the rows
  // decoded to f32 by the cache's scalar codec (any format, any layout).
  int max_len = 0;
  for (int64_t t = 0; t < n; ++t) max_len = std::max(max_len, batch.positions[t] + 1);
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<size_t>(q_per_kv) * max_len);  // [q_per_kv, kv_len]
    std::vector<float> keys(static_cast<size_t>(max_len) * hd);          // [kv_len, head_dim]
    std::vector<float> values(keys.size());                              // [kv_len, head_dim]
#pragma omp for schedule(static)
    for (int64_t work = 0; work < n * n_kv; ++work) {
      const int64_t t = work / n_kv;
      const int g = static_cast<int>(work % n_kv);
      const int len = batch.positions[t] + 1, user = batch.user_rows[t];
      cache.DecodeRows(l, user, g, 0, len, keys.data(), values.data());
      ReferenceAttentionGroup(&q[(t * n_head + g * q_per_kv) * hd], q_per_kv,
                              MatrixRef{DType::kF32, len, hd, hd, keys.data()},
                              MatrixRef{DType::kF32, len, hd, hd, values.data()}, scale,
                              scores.data(), &attn[(t * n_head + g * q_per_kv) * hd]);
    }
  }
}

}  // namespace wc
