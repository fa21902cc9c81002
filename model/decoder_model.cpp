#include "model/decoder_model.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <omp.h>

#include "attention/reference_attention.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_group.h"
#include "kernels/gemm/gemm_profile.h"
#include "model/layer_context.h"
#include "model/partial_sums.h"
#include "model/rope_scaling.h"
#include "util/error.h"

namespace wc {
namespace {

const float* OrNull(const std::vector<float>& v) {
  return v.empty() ? nullptr : v.data();
}

void PollInterrupt(const DecoderModel::Interrupt& interrupted) {
  if (interrupted && interrupted()) throw PartialSums::Interrupted{};
}

// The group's GEMMs (kernels/gemm/gemm_group.h) in pieces of about slice_macs / threads
// multiply-adds a thread, polling `interrupted` on the calling thread before each of its pieces:
// a few milliseconds of work at most between polls. Results are those of one Gemm call a part (a
// row's output never depends on the row range). The pieces are whole panels, handed out in order
// to whichever thread is free, in one parallel region: the GEMM was once run as slices of a region
// each, split evenly, and on two vCPUs the faster thread waited at every slice's barrier for the
// other (13% of a bfp4 prefill's samples spun there; docs/performance.md, "One region a GEMM").
// Small GEMMs (decode: one slice) keep the even split, each thread one contiguous range.
void InterruptibleGemm(const GemmGroup& group, const DecoderModel::Interrupt& interrupted,
                       int64_t slice_macs) {
  const int64_t panels = group.panels();
  const int64_t macs_per_panel =
      std::max<int64_t>(1, group.n_tokens() * group.cols() * PackedMatrix::kPanelRows);
  const int64_t threads = omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads());
  const int64_t per_slice = std::max<int64_t>(1, slice_macs / macs_per_panel);
  if (!interrupted || per_slice >= panels) {
    PollInterrupt(interrupted);
    group.Run(0, panels);
    return;
  }
  const int64_t piece = std::max<int64_t>(1, per_slice / threads);
  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr poll_error;  // what `interrupted` threw, rethrown after the region
#pragma omp parallel              // one thread inside another region: the same loop, serially
  {
    const bool caller = omp_get_thread_num() == 0;  // `interrupted` runs on the calling thread
    for (;;) {
      if (caller) {
        try {
          if (interrupted()) stop.store(true, std::memory_order_relaxed);
        } catch (...) {
          poll_error = std::current_exception();
          stop.store(true, std::memory_order_relaxed);
        }
      }
      if (stop.load(std::memory_order_relaxed)) break;
      const int64_t a = next.fetch_add(piece, std::memory_order_relaxed);
      if (a >= panels) break;
      group.Run(a, std::min(panels, a + piece));  // on this thread: inside the region
    }
  }
  if (poll_error) std::rethrow_exception(poll_error);
  if (stop.load()) throw PartialSums::Interrupted{};
}

// A checkpoint tensor's role, the same in every layer: its name after the layer number, without
// ".weight" ("model.layers.3.mlp.down_proj.weight" -> "mlp.down_proj", "blk.0.ffn_up.weight" ->
// "ffn_up").
std::string MatrixRole(const std::string& name) {
  std::string role = name;
  for (size_t i = 0; i + 2 < name.size(); ++i) {
    if (name[i] != '.' || !std::isdigit(static_cast<unsigned char>(name[i + 1]))) continue;
    size_t j = i + 1;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j < name.size() && name[j] == '.') {
      role = name.substr(j + 1);
      break;
    }
  }
  const std::string suffix = ".weight";
  if (role.size() > suffix.size() &&
      role.compare(role.size() - suffix.size(), suffix.size(), suffix) == 0)
    role.resize(role.size() - suffix.size());
  return role;
}

// The GEMM profile's name of a call over these matrices ("a+b+c" for a group), built only while a
// profile records (kernels/gemm/gemm_profile.h).
std::string ProfiledRoles(const std::vector<const Linear*>& linears) {
  if (!GemmProfile::Recording()) return {};
  std::string roles;
  for (const Linear* l : linears) roles += (roles.empty() ? "" : "+") + MatrixRole(l->name);
  return roles;
}

// Multiply-adds x 2 of m tokens through the matrices.
double GemmFlops(int64_t m, const std::vector<const Linear*>& linears) {
  double flops = 0;
  for (const Linear* l : linears)
    flops += 2.0 * static_cast<double>(m) * static_cast<double>(l->p.rows()) *
             static_cast<double>(l->p.cols());
  return flops;
}

// y[t] = the config's norm of x[t], t < n.  x, y: [n, hidden]
void NormRows(const ModelConfig& c, const NormWeights& norm, const float* x, int64_t n, float* y) {
  const int64_t h = c.hidden_size;
  for (int64_t t = 0; t < n; ++t) {
    if (c.norm == NormKind::kRmsNorm)
      RmsNorm(&x[t * h], norm.w.data(), c.norm_eps, &y[t * h], h);
    else
      LayerNorm(&x[t * h], norm.w.data(), norm.b.data(), c.norm_eps, &y[t * h], h);
  }
}

// The weights with their matrices packed for the GEMM kernels, after the cheap option checks.
ModelWeights Packed(ModelWeights w, const ModelOptions& options) {
  if (w.split.whole()) FracturedLMHead::PaddedVocab(w.lm_head.rows, options.lm_head_fractures);
  w.Pack(options.matmul_precision, options.weights, options.pack_progress);
  return w;
}

}  // namespace

std::unique_ptr<DecoderModel> DecoderModel::Load(const std::string& dir,
                                                 const ModelOptions& options) {
  ModelConfig config = LoadConfig(dir);
  const Communicator* group = options.tensor_group;
  const TensorSplit split = group == nullptr ? TensorSplit::Whole(config, options.lm_head_fractures)
                                             : TensorSplit::Make(config, options.lm_head_fractures,
                                                                 group->rank(), group->size());
  // A converted checkpoint's block-float groups load as stored (model/converted_checkpoint.h).
  const WeightSpec spec = EffectiveWeightSpec(ReadStoredWeightFormats(dir), options.weights, dir);
  if (group != nullptr) CheckBfpSlices(config, options.lm_head_fractures, group->size(), spec);
  ModelWeights weights = ModelWeights::Load(config, dir, split);
  ModelOptions resolved = options;  // options().weights names what is held
  resolved.weights = spec;
  return std::make_unique<DecoderModel>(config, std::move(weights), resolved);
}

DecoderModel::DecoderModel(const ModelConfig& config, ModelWeights weights,
                           const ModelOptions& options)
    : options_(options),
      config_(config),
      weights_(Packed(std::move(weights), options)),
      lm_head_(weights_.lm_head_p, weights_.split.whole() ? options.lm_head_fractures : 1),
      rope_(config.head_dim(), RopeInvFreq(config)),
      engine_(MeshPreset(options.mesh), options.flash) {
  if (config_.alibi) alibi_slopes_ = AlibiSlopes(config_.n_head);
  if (tensor_parallel() && options.tensor_group->rank() == 0)
    leader_ = std::make_unique<TensorParallelLeader>(*options.tensor_group);
  options_.pack_progress = nullptr;  // packing is done; what it captured may not outlive the load
}

std::string DecoderModel::Fingerprint() const {
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

KVCacheShape DecoderModel::CacheShape(int user_rows, int max_seq) const {
  KVCacheShape s;
  s.n_layers = config_.n_layers;
  s.user_rows = user_rows;
  s.n_kv_heads = split().n_kv_heads();
  s.max_seq = max_seq;
  s.head_dim = config_.head_dim();
  return s;
}

bool DecoderModel::Forward(const TokenBatch& batch, KVCache& cache, std::vector<float>* logits,
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
      const LayerContext ctx{
          *this, config_, weights_.split, weights_.layers[static_cast<size_t>(l)],
          l,     batch,   cache,          sums};
      LayerGraphOf(config_.arch)(ctx, x);
    }
    sums.Poll();
  } catch (const PartialSums::Interrupted&) {
    return false;
  }

  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  std::vector<float> normed(static_cast<size_t>(n_out * hidden));  // [n_out, hidden]
  for (int64_t r = 0; r < n_out; ++r)
    NormRows(config_, weights_.final_norm, &x[batch.logit_rows[r] * hidden], 1,
             &normed[r * hidden]);
  logits->assign(static_cast<size_t>(n_out * config_.vocab_size), 0.0f);
  if (tensor_parallel())
    GatheredLogits(normed.data(), n_out, logits->data());
  else if (n_out > 0)
    lm_head_.Compute(normed.data(), n_out, logits->data());
  return true;
}

void DecoderModel::GatheredLogits(const float* normed, int64_t n_out, float* logits) const {
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

void LayerContext::Norm(const NormWeights& norm, const float* x, int64_t n, float* y) const {
  NormRows(config, norm, x, n, y);
}

void LayerContext::MatMul(const float* in, int64_t m, const Linear& l, float* out) const {
  const GemmCallTimer timer(ProfiledRoles({&l}), l.p, m, GemmFlops(m, {&l}));
  InterruptibleGemm(GemmGroup(in, m, l.p.cols(), {{&l.p, OrNull(l.b), out}}),
                    sums.matmul_interrupt(), model.options_.interrupt_slice_macs);
}

void LayerContext::MatMuls(
    const float* in, int64_t m,
    std::initializer_list<std::pair<const Linear*, float*>> projections) const {
  std::vector<GemmPart> parts;
  std::vector<const Linear*> linears;
  for (const auto& [l, out] : projections) {
    parts.push_back({&l->p, OrNull(l->b), out});
    linears.push_back(l);
  }
  const int64_t cols = parts.front().w->cols();
  const GemmCallTimer timer(ProfiledRoles(linears), *parts.front().w, m, GemmFlops(m, linears));
  InterruptibleGemm(GemmGroup(in, m, cols, std::move(parts)), sums.matmul_interrupt(),
                    model.options_.interrupt_slice_macs);
}

int64_t LayerContext::MlpChunk(const Linear& first) const {
  constexpr int64_t kTarget = 128;
  const int64_t total = n();
  if (total <= kTarget) return std::max<int64_t>(1, total);
  const int64_t chunks = (total + kTarget - 1) / kTarget;
  const int64_t even = (total + chunks - 1) / chunks;
  const int64_t mr = GemmTileTokens(first.p, even);
  return std::min(total, (even + mr - 1) / mr * mr);
}

void LayerContext::MatMulPartial(const float* in, int64_t m, const Linear& l, float* out) const {
  const GemmCallTimer timer(ProfiledRoles({&l}), l.p, m, GemmFlops(m, {&l}));
  InterruptibleGemm(GemmGroup(in, m, l.p.cols(), {{&l.p, sums.OwnBias(l.b), out}}),
                    sums.matmul_interrupt(), model.options_.interrupt_slice_macs);
}

AlibiBias DecoderModel::alibi() const {
  if (alibi_slopes_.empty()) return {};
  // This rank's query heads' slopes; HF's Falcon rounds the bias to bf16 whatever its dtype.
  return AlibiBias{alibi_slopes_.data() + split().q_head_begin, /*bf16=*/true};
}

void LayerContext::Rope(float* x, int pos) const {
  model.rope_.Apply(x, pos);
}

bool LayerContext::WriteKV(int64_t t, const float* k, const float* v) const {
  return sums.TryWrite([&] { cache.Write(layer, batch.user_rows[t], batch.positions[t], k, v); });
}

void LayerContext::Attention(const float* q, float* attn) const {
  if (!sums.failed()) model.Attention(layer, batch, cache, q, attn);
  if (model.observer_) model.observer_(layer, attn, n());
}

void DecoderModel::Attention(int l, const TokenBatch& batch, const KVCache& cache, const float* q,
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
    op.alibi = alibi();
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
                              scores.data(), &attn[(t * n_head + g * q_per_kv) * hd], alibi(),
                              g * q_per_kv);
    }
  }
}

}  // namespace wc
