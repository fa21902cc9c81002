#include "model/weights.h"

#include <unistd.h>

#include <algorithm>
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

namespace {

// The kernel maps the page-cache pages around a faulting one too ("fault-around": 64 KiB,
// aligned): a lookup of one embedding row (9 KiB for falcon-7b) makes 64 KiB resident, so lookups
// of many tokens would, over a long run, make the whole table resident beside the packed weights.
constexpr uintptr_t kFaultAroundBytes = 64 << 10;

// Drops the resident pages a lookup of [row, row + bytes) of `table` (in a file mapping) faulted
// in: the fault-around windows it touches, clipped to the table's pages (which lie inside the
// mapping; pages of the neighbouring tensors it shares are read back from the page cache if used).
void ReleaseLookedUp(const MatrixRef& table, const uint8_t* row, size_t bytes) {
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto t0 = reinterpret_cast<uintptr_t>(table.data);
  const uintptr_t t1 = t0 + static_cast<uintptr_t>(table.rows * table.row_stride *
                                                   static_cast<int64_t>(DTypeSize(table.dtype)));
  const auto r0 = reinterpret_cast<uintptr_t>(row);
  const uintptr_t lo = std::max(t0 / page * page, r0 / kFaultAroundBytes * kFaultAroundBytes);
  const uintptr_t hi =
      std::min((t1 + page - 1) / page * page,
               (r0 + bytes + kFaultAroundBytes - 1) / kFaultAroundBytes * kFaultAroundBytes);
  if (hi > lo) ReleaseMappedPages(reinterpret_cast<const void*>(lo), hi - lo);
}

}  // namespace

void FalconWeights::Embedding(int64_t token, float* out) const {
  if (EmbeddingsFromPackedHead()) return lm_head_p.Row(token, out);
  GatherRow(embeddings, token, out);
  const size_t row_bytes = static_cast<size_t>(embeddings.row_stride) * DTypeSize(embeddings.dtype);
  ReleaseLookedUp(embeddings, static_cast<const uint8_t*>(embeddings.data) + token * row_bytes,
                  row_bytes);
}

bool FalconWeights::EmbeddingsFromPackedHead() const {
  return lm_head_tied && split.whole() && !lm_head_p.empty() &&
         lm_head_p.format() == FormatOfDType(embeddings.dtype);
}

namespace {

// Source bytes of m a packer reads (its rows; a strided view's columns only).
int64_t SourceBytes(const MatrixRef& m) {
  return m.rows * m.cols * static_cast<int64_t>(DTypeSize(m.dtype));
}

// `rows_done(r1)`: rows [0, r1) of m are packed.
PackedMatrix PackAndRelease(const MatrixRef& m, WeightFormat format,
                            ActivationPrecision bf16_precision, const std::string& name,
                            const std::function<void(int64_t)>& rows_done) {
  const int64_t row_bytes = m.row_stride * DTypeSize(m.dtype);
  return PackedMatrix::Pack(m, format, bf16_precision, name, [&](int64_t r0, int64_t r1) {
    ReleaseMappedPages(static_cast<const uint8_t*>(m.data) + r0 * row_bytes,
                       static_cast<size_t>((r1 - r0) * row_bytes));
    if (rows_done) rows_done(r1);
  });
}

}  // namespace

void FalconWeights::Pack(ActivationPrecision bf16_precision, const WeightSpec& spec,
                         const PackProgress& progress) {
  int64_t total = SourceBytes(lm_head), before = 0;  // source bytes: all, and of matrices packed
  for (const LayerWeights& l : layers)
    for (const MatrixRef* m : {&l.qkv, &l.dense, &l.fc1, &l.fc2}) total += SourceBytes(*m);
  auto pack = [&](const MatrixRef& m, WeightGroup g, const std::string& name) {
    const auto stored = stored_tiles.find(name);
    if (stored != stored_tiles.end()) {  // a converted checkpoint's tiles (counted as m's shape)
      PackedMatrix p = stored->second.Pack(spec.Of(g), bf16_precision, name);
      before += SourceBytes(m);
      if (progress) progress(before, total);
      return p;
    }
    std::function<void(int64_t)> rows_done;
    if (progress) {
      rows_done = [&](int64_t r1) {
        progress(before + r1 * m.cols * static_cast<int64_t>(DTypeSize(m.dtype)), total);
      };
    }
    PackedMatrix p = PackAndRelease(m, spec.Resolve(g, m.dtype), bf16_precision, name, rows_done);
    before += SourceBytes(m);
    return p;
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerWeights& l = layers[i];
    const std::string p = Cat("transformer.h.", i, ".");
    l.qkv_p = pack(l.qkv, WeightGroup::kAttn, p + "self_attention.query_key_value.weight");
    l.dense_p = pack(l.dense, WeightGroup::kAttn, p + "self_attention.dense.weight");
    l.fc1_p = pack(l.fc1, WeightGroup::kMlp, p + "mlp.dense_h_to_4h.weight");
    l.fc2_p = pack(l.fc2, WeightGroup::kMlp, p + "mlp.dense_4h_to_h.weight");
  }
  lm_head_p = pack(
      lm_head, WeightGroup::kLmHead,
      lm_head_tied ? "transformer.word_embeddings.weight (the tied LM head)" : "lm_head.weight");
  std::vector<std::vector<uint8_t>>().swap(gathered);  // packed: the copies are no longer read
  stored_tiles.clear();
  // The lookup reads the mapping a row at a time: no read-ahead of megabytes around each row.
  if (!EmbeddingsFromPackedHead())
    AdviseRandomAccess(
        embeddings.data,
        static_cast<size_t>(embeddings.rows * embeddings.row_stride) * DTypeSize(embeddings.dtype));
}

int64_t FalconWeights::HeldBytes() const {
  int64_t bytes = static_cast<int64_t>(lm_head_p.bytes() + (ln_f_w.size() + ln_f_b.size()) * 4);
  for (const LayerWeights& l : layers) {
    bytes += static_cast<int64_t>(l.qkv_p.bytes() + l.dense_p.bytes() + l.fc1_p.bytes() +
                                  l.fc2_p.bytes());
    for (const auto* v : {&l.ln_attn_w, &l.ln_attn_b, &l.ln_mlp_w, &l.ln_mlp_b, &l.qkv_b,
                          &l.dense_b, &l.fc1_b, &l.fc2_b})
      bytes += static_cast<int64_t>(v->size() * sizeof(float));
  }
  return bytes;
}

namespace {

// Rows [r0, r1) of m.
MatrixRef Rows(const MatrixRef& m, int64_t r0, int64_t r1) {
  MatrixRef s = m;
  s.rows = r1 - r0;
  s.data = static_cast<const uint8_t*>(m.data) + r0 * m.row_stride * DTypeSize(m.dtype);
  return s;
}

// Columns [c0, c1) of m (a strided view).
MatrixRef Cols(const MatrixRef& m, int64_t c0, int64_t c1) {
  MatrixRef s = m;
  s.cols = c1 - c0;
  s.data = static_cast<const uint8_t*>(m.data) + c0 * DTypeSize(m.dtype);
  return s;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> QkvRowRanges(const FalconConfig& c, const TensorSplit& s) {
  const int64_t hd = c.head_dim(), q_per_kv = c.n_head / c.n_kv_heads;
  // One KV head, grouped or multi-query: [n_head q][k][v]; the rank's q heads, then the shared
  // k and v (the same rows when it holds every head).
  if (c.n_kv_heads == 1 && c.qkv_layout() != QkvLayout::kMultiHead) {
    if (s.q_head_end == c.n_head) return {{s.q_head_begin * hd, int64_t{c.n_head + 2} * hd}};
    return {{s.q_head_begin * hd, s.q_head_end * hd},
            {int64_t{c.n_head} * hd, int64_t{c.n_head + 2} * hd}};
  }
  switch (c.qkv_layout()) {
    case QkvLayout::kGrouped:  // [kv groups][q_per_kv q, k, v]
      return {{s.kv_begin * (q_per_kv + 2) * hd, s.kv_end * (q_per_kv + 2) * hd}};
    case QkvLayout::kMultiHead:  // [heads][q, k, v]
      return {{3 * s.q_head_begin * hd, 3 * s.q_head_end * hd}};
    case QkvLayout::kMultiQuery:
      break;  // n_kv_heads == 1, above
  }
  return {};
}

void CheckBfpSlices(const FalconConfig& c, int lm_head_fractures, int ranks,
                    const WeightSpec& spec) {
  if (ranks <= 1 || !spec.any_bfp()) return;
  auto bfp = [&](WeightGroup g) { return spec.Of(g) && IsBfp(*spec.Of(g)); };
  const int64_t hd = c.head_dim();
  for (int r = 0; r < ranks; ++r) {
    const TensorSplit s = TensorSplit::Make(c, lm_head_fractures, r, ranks);
    auto check = [&](WeightGroup g, const char* what, const char* dim, int64_t b, int64_t e,
                     int64_t extent) {
      if (!bfp(g) || b == e || (b % kBfpTileDim == 0 && (e % kBfpTileDim == 0 || e == extent)))
        return;
      throw Error(Cat("--weights ", spec.ToString(), " with --tensor-parallel ", ranks, ": rank ",
                      r, "'s slice of ", what, " (", dim, " [", b, ", ", e, ") of ", extent,
                      ") does not fall on whole 32-wide block-float tiles; choose another "
                      "--tensor-parallel or hold ",
                      WeightGroupName(g), " in bf16 or f32 (--weights ", WeightGroupName(g),
                      "=bf16)"));
    };
    for (const auto& [b, e] : QkvRowRanges(c, s))
      check(WeightGroup::kAttn, "query_key_value", "rows", b, e, c.qkv_rows());
    check(WeightGroup::kAttn, "self_attention.dense", "columns", s.q_head_begin * hd,
          s.q_head_end * hd, int64_t{c.n_head} * hd);
    check(WeightGroup::kMlp, "the MLP (dense_h_to_4h rows, dense_4h_to_h columns)", "units",
          s.ffn_begin, s.ffn_end, c.ffn_hidden_size);
    check(WeightGroup::kLmHead, "the LM head", "rows", s.vocab_begin, s.vocab_end, c.vocab_size);
  }
}

FalconWeights FalconWeights::Load(const FalconConfig& c, const std::string& dir,
                                  const TensorSplit& split) {
  FalconWeights w;
  w.split = split;
  w.checkpoint = Checkpoint::Open(dir);
  const Checkpoint& ck = *w.checkpoint;
  const int64_t h = c.hidden_size, ffn = c.ffn_hidden_size, qkv = c.qkv_rows();
  const int64_t attn_dim = static_cast<int64_t>(c.n_head) * c.head_dim();
  auto vec = [&](const std::string& name, int64_t n) { return ToF32(ck.Get(name, {n})); };
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) {
    return AsMatrix(ck.Get(name, {rows, cols}));
  };
  w.embeddings = mat("transformer.word_embeddings.weight", c.vocab_size, h);
  // A converted checkpoint's block-float groups: bound as tiles, the rank's rows (several ranges
  // concatenated) and columns [c0, c1) of the [rows, cols] matrix.
  const std::optional<WeightSpec> stored = ReadStoredWeightFormats(dir);
  auto stored_bfp = [&](WeightGroup g) {
    return stored && IsBfp(*stored->Of(g)) ? stored->Of(g) : std::nullopt;
  };
  auto tiles = [&](const std::string& name, WeightGroup g, int64_t rows, int64_t cols,
                   const std::vector<std::pair<int64_t, int64_t>>& row_ranges, int64_t c0,
                   int64_t c1) {
    StoredTiles t = StoredTiles::Bind(ck, name, *stored_bfp(g), rows, cols, row_ranges, c0, c1);
    MatrixRef m{w.embeddings.dtype, t.layout.out, t.layout.in, t.layout.in, nullptr};
    w.stored_tiles.emplace(name, std::move(t));
    return m;
  };

  w.lm_head_tied = !ck.Has("lm_head.weight");
  if (!w.lm_head_tied && stored_bfp(WeightGroup::kLmHead)) {
    w.lm_head = tiles("lm_head.weight", WeightGroup::kLmHead, c.vocab_size, h,
                      {{split.vocab_begin, split.vocab_end}}, 0, h);
  } else if (stored_bfp(WeightGroup::kLmHead)) {
    throw Error(Cat(ck.source(), ": missing tensor 'lm_head.weight' (config.json's ",
                    kStoredWeightsKey, " stores lm_head in ",
                    WeightFormatName(*stored_bfp(WeightGroup::kLmHead)), ")"));
  } else if (!w.lm_head_tied) {
    w.lm_head = mat("lm_head.weight", c.vocab_size, h);
  } else if (!c.tie_word_embeddings) {
    throw Error(Cat(ck.source(),
                    ": missing tensor 'lm_head.weight' (config.json sets "
                    "tie_word_embeddings false)"));
  } else {
    w.lm_head = w.embeddings;
  }
  if (!stored_bfp(WeightGroup::kLmHead))
    w.lm_head = Rows(w.lm_head, split.vocab_begin, split.vocab_end);
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
    const auto qkv_ranges = QkvRowRanges(c, split);
    const int64_t hd = c.head_dim();
    if (stored_bfp(WeightGroup::kAttn)) {
      L.qkv = tiles(p + "self_attention.query_key_value.weight", WeightGroup::kAttn, qkv, h,
                    qkv_ranges, 0, h);
      L.dense = tiles(p + "self_attention.dense.weight", WeightGroup::kAttn, h, attn_dim, {{0, h}},
                      split.q_head_begin * hd, split.q_head_end * hd);
    } else {
      const MatrixRef qkv_all = mat(p + "self_attention.query_key_value.weight", qkv, h);
      if (qkv_ranges.size() == 1) {
        L.qkv = Rows(qkv_all, qkv_ranges[0].first, qkv_ranges[0].second);
      } else {  // several ranges: gathered into one matrix
        const int64_t row_bytes = h * DTypeSize(qkv_all.dtype);
        std::vector<uint8_t> rows;
        for (const auto& [r0, r1] : qkv_ranges) {
          const auto* src = static_cast<const uint8_t*>(qkv_all.data) + r0 * row_bytes;
          rows.insert(rows.end(), src, src + (r1 - r0) * row_bytes);
        }
        L.qkv = qkv_all;
        L.qkv.rows = static_cast<int64_t>(rows.size()) / row_bytes;
        w.gathered.push_back(std::move(rows));
        L.qkv.data = w.gathered.back().data();
      }
      L.dense = Cols(mat(p + "self_attention.dense.weight", h, attn_dim), split.q_head_begin * hd,
                     split.q_head_end * hd);
    }
    if (stored_bfp(WeightGroup::kMlp)) {
      L.fc1 = tiles(p + "mlp.dense_h_to_4h.weight", WeightGroup::kMlp, ffn, h,
                    {{split.ffn_begin, split.ffn_end}}, 0, h);
      L.fc2 = tiles(p + "mlp.dense_4h_to_h.weight", WeightGroup::kMlp, h, ffn, {{0, h}},
                    split.ffn_begin, split.ffn_end);
    } else {
      L.fc1 = Rows(mat(p + "mlp.dense_h_to_4h.weight", ffn, h), split.ffn_begin, split.ffn_end);
      L.fc2 = Cols(mat(p + "mlp.dense_4h_to_h.weight", h, ffn), split.ffn_begin, split.ffn_end);
    }
    if (c.bias) {
      const std::vector<float> qkv_b = vec(p + "self_attention.query_key_value.bias", qkv);
      for (const auto& [r0, r1] : qkv_ranges)
        L.qkv_b.insert(L.qkv_b.end(), qkv_b.begin() + r0, qkv_b.begin() + r1);
      L.dense_b = vec(p + "self_attention.dense.bias", h);
      const std::vector<float> fc1_b = vec(p + "mlp.dense_h_to_4h.bias", ffn);
      L.fc1_b.assign(fc1_b.begin() + split.ffn_begin, fc1_b.begin() + split.ffn_end);
      L.fc2_b = vec(p + "mlp.dense_4h_to_h.bias", h);
    }
    w.layers.push_back(std::move(L));
  }
  return w;
}

}  // namespace wc
