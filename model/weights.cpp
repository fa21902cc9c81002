#include "model/weights.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>

#include "kernels/gemm/format_table.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

MatrixRef AsMatrix(const TensorInfo& t) {
  MatrixRef m;
  if (!t.readable) {  // a GGUF file's quantized blocks (Checkpoint::GetMatrix)
    m.quant = GgmlQuantNamed(t.dtype_name);
    WC_CHECK(m.quant.has_value(), "unreadable tensor ", t.name, " bound as a matrix");
  }
  m.dtype = t.readable ? t.dtype : DType::kF32;
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
  const uint8_t* base = MatrixAt(m, row, 0);
  if (m.quant) return DequantizeGgmlRow(*m.quant, base, out, m.cols);
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
  const uintptr_t t1 = t0 + static_cast<uintptr_t>(table.rows * MatrixRowBytes(table));
  const auto r0 = reinterpret_cast<uintptr_t>(row);
  const uintptr_t lo = std::max(t0 / page * page, r0 / kFaultAroundBytes * kFaultAroundBytes);
  const uintptr_t hi =
      std::min((t1 + page - 1) / page * page,
               (r0 + bytes + kFaultAroundBytes - 1) / kFaultAroundBytes * kFaultAroundBytes);
  if (hi > lo) ReleaseMappedPages(reinterpret_cast<const void*>(lo), hi - lo);
}

}  // namespace

void ModelWeights::Embedding(int64_t token, float* out) const {
  if (EmbeddingsFromPackedHead()) return lm_head_p.Row(token, out);
  GatherRow(embeddings, token, out);
  const auto row_bytes = static_cast<size_t>(MatrixRowBytes(embeddings));
  ReleaseLookedUp(embeddings, MatrixAt(embeddings, token, 0), row_bytes);
}

bool ModelWeights::EmbeddingsFromPackedHead() const {
  return lm_head_tied && split.whole() && !lm_head_p.empty() &&
         lm_head_p.format() == StoredFormat(embeddings);
}

namespace {

// Source bytes of m a packer reads (its rows; a strided view's columns only).
int64_t SourceBytes(const MatrixRef& m) {
  if (m.quant)
    return m.rows * (m.cols / GgmlQuantBlockValues(*m.quant)) * GgmlQuantBlockBytes(*m.quant);
  return m.rows * m.cols * static_cast<int64_t>(DTypeSize(m.dtype));
}

// A GGML-quantized m as the format `format` asks: as stored (its own type), or f32 (dequantized
// exactly, as ggml does); any other would round twice and is refused, naming the tensor.
PackedMatrix PackQuantized(const MatrixRef& m, WeightFormat format, const std::string& name,
                           const PackedMatrix::RowsDone& done) {
  if (format == FormatOf(*m.quant))
    return PackedMatrix::FromGgmlRows(*m.quant, MatrixAt(m, 0, 0), m.rows, m.cols,
                                      MatrixRowBytes(m), name, done);
  if (format != WeightFormat::kF32)
    throw Error(Cat("--weights ", WeightFormatName(format), ": ", name, " is ",
                    GgmlQuantName(*m.quant),
                    " in the GGUF file; it runs as stored (auto) or as "
                    "f32 (exact), since ",
                    WeightFormatName(format),
                    " would round it twice (wormchat convert --allow-requantize does that on "
                    "purpose)"));
  std::vector<float> rows(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) GatherRow(m, r, rows.data() + r * m.cols);
  const MatrixRef f{DType::kF32, m.rows, m.cols, m.cols, rows.data()};
  PackedMatrix p = PackedMatrix::Pack(f, WeightFormat::kF32, ActivationPrecision::kF32, name);
  if (done) done(0, m.rows);
  return p;
}

// `rows_done(r1)`: rows [0, r1) of m are packed.
PackedMatrix PackAndRelease(const MatrixRef& m, WeightFormat format,
                            ActivationPrecision bf16_precision, const std::string& name,
                            const std::function<void(int64_t)>& rows_done) {
  const int64_t row_bytes = MatrixRowBytes(m);
  const PackedMatrix::RowsDone release = [&](int64_t r0, int64_t r1) {
    ReleaseMappedPages(MatrixAt(m, r0, 0), static_cast<size_t>((r1 - r0) * row_bytes));
    if (rows_done) rows_done(r1);
  };
  if (m.quant) return PackQuantized(m, format, name, release);
  return PackedMatrix::Pack(m, format, bf16_precision, name, release);
}

}  // namespace

std::vector<const Linear*> LayerWeights::Linears() const {
  std::vector<const Linear*> out;
  for (const Linear* l : {&qkv, &q, &k, &v, &attn_out, &gate, &up, &down})
    if (l->present()) out.push_back(l);
  return out;
}

std::vector<Linear*> LayerWeights::Linears() {
  std::vector<Linear*> out;
  for (Linear* l : {&qkv, &q, &k, &v, &attn_out, &gate, &up, &down})
    if (l->present()) out.push_back(l);
  return out;
}

Linear* LayerWeights::LinearOf(TensorRole role) {
  using R = TensorRole;
  switch (role) {
    case R::kQkv:
    case R::kQkvBias:
      return &qkv;
    case R::kQ:
    case R::kQBias:
      return &q;
    case R::kK:
    case R::kKBias:
      return &k;
    case R::kV:
    case R::kVBias:
      return &v;
    case R::kAttnOut:
    case R::kAttnOutBias:
      return &attn_out;
    case R::kGate:
    case R::kGateBias:
      return &gate;
    case R::kUp:
    case R::kUpBias:
      return &up;
    case R::kDown:
    case R::kDownBias:
      return &down;
    default:
      return nullptr;
  }
}

NormWeights* LayerWeights::NormOf(TensorRole role) {
  using R = TensorRole;
  if (role == R::kAttnNorm || role == R::kAttnNormBias) return &attn_norm;
  if (role == R::kMlpNorm || role == R::kMlpNormBias) return &mlp_norm;
  return nullptr;
}

DType ModelWeights::matrix_dtype() const {
  const MatrixRef& m =
      !layers.empty() && !layers[0].Linears().empty() ? layers[0].Linears()[0]->w : embeddings;
  // GGML-quantized weights stand for bf16 ones: their KV cache defaults to bf16 (llama.cpp's to
  // f16).
  return m.quant ? DType::kBF16 : m.dtype;
}

std::string ModelWeights::packed_formats() const {
  std::set<WeightFormat> used;
  for (const LayerWeights& l : layers)
    for (const Linear* m : l.Linears()) used.insert(m->p.format());
  if (!lm_head_p.empty()) used.insert(lm_head_p.format());
  std::string s;
  for (WeightFormat f : used) s += (s.empty() ? "" : "+") + std::string(WeightFormatName(f));
  return s;
}

bool ModelWeights::HoldsAny(bool (*is)(WeightFormat)) const {
  for (const LayerWeights& l : layers)
    for (const Linear* m : l.Linears())
      if (is(m->p.format())) return true;
  return is(lm_head_p.format());
}

bool ModelWeights::holds_bfp() const {
  return HoldsAny([](WeightFormat f) { return IsBfp(f); });
}

bool ModelWeights::holds_bf16() const {
  return HoldsAny([](WeightFormat f) { return f == WeightFormat::kBF16; });
}

void ModelWeights::Pack(ActivationPrecision bf16_precision, const WeightSpec& spec,
                        const PackProgress& progress) {
  int64_t total = SourceBytes(lm_head), before = 0;  // source bytes: all, and of matrices packed
  for (const LayerWeights& l : layers)
    for (const Linear* m : l.Linears()) total += SourceBytes(m->w);
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
        progress(before + (m.rows > 0 ? SourceBytes(m) * r1 / m.rows : 0), total);
      };
    }
    PackedMatrix p =
        PackAndRelease(m, spec.Of(g).value_or(StoredFormat(m)), bf16_precision, name, rows_done);
    before += SourceBytes(m);
    return p;
  };
  for (LayerWeights& l : layers)
    for (Linear* m : l.Linears()) m->p = pack(m->w, m->group, m->name);
  lm_head_p = pack(lm_head, WeightGroup::kLmHead,
                   lm_head_tied ? lm_head_name + " (the tied LM head)" : lm_head_name);
  std::vector<std::vector<uint8_t>>().swap(gathered);  // packed: the copies are no longer read
  stored_tiles.clear();
  // The lookup reads the mapping a row at a time: no read-ahead of megabytes around each row.
  if (!EmbeddingsFromPackedHead())
    AdviseRandomAccess(embeddings.data,
                       static_cast<size_t>(embeddings.rows * MatrixRowBytes(embeddings)));
}

int64_t ModelWeights::HeldBytes() const {
  int64_t bytes =
      static_cast<int64_t>(lm_head_p.bytes() + (final_norm.w.size() + final_norm.b.size()) * 4);
  for (const LayerWeights& l : layers) {
    for (const Linear* m : l.Linears())
      bytes += static_cast<int64_t>(m->p.bytes() + m->b.size() * sizeof(float));
    for (const NormWeights* n : {&l.attn_norm, &l.mlp_norm})
      bytes += static_cast<int64_t>((n->w.size() + n->b.size()) * sizeof(float));
  }
  return bytes;
}

namespace {

// Rows [r0, r1) of m.
MatrixRef Rows(const MatrixRef& m, int64_t r0, int64_t r1) {
  MatrixRef s = m;
  s.rows = r1 - r0;
  s.data = MatrixAt(m, r0, 0);
  return s;
}

// Columns [c0, c1) of m (a strided view). A quantized m splits on whole blocks only (the format
// table's tp_cols): `name` and the split are named otherwise.
MatrixRef Cols(const MatrixRef& m, int64_t c0, int64_t c1, const std::string& name) {
  const WeightFormat f = StoredFormat(m);
  if (!SliceKeepsBlocks(f, /*along_cols=*/true, c0, c1, m.cols))
    throw Error(Cat("--tensor-parallel: ", name, " is ", WeightFormatName(f),
                    ", whose blocks hold ", FormatRow(f).tp_cols, " columns; this rank's columns [",
                    c0, ", ", c1, ") would cut a block (choose another --tensor-parallel)"));
  MatrixRef s = m;
  s.cols = c1 - c0;
  s.data = MatrixAt(m, 0, c0);
  return s;
}

// The LM head's name in `c`'s table: the untied head's, which a tied checkpoint may also carry.
std::string OutputName(const ModelConfig& c) {
  ModelConfig untied = c;
  untied.tie_word_embeddings = false;
  return *TensorName(untied, TensorRole::kOutput);
}

}  // namespace

void CheckBfpSlices(const ModelConfig& c, int lm_head_fractures, int ranks,
                    const WeightSpec& spec) {
  if (ranks <= 1 || !spec.any_bfp()) return;
  auto bfp = [&](WeightGroup g) { return spec.Of(g) && IsBfp(*spec.Of(g)); };
  // One layer's matrices stand for all (every layer has the same shapes).
  std::vector<TensorEntry> entries;
  for (const TensorEntry& e : ModelTensors(c))
    if (e.layer == 0 && IsMatrixRole(e.role)) entries.push_back(e);
  for (int r = 0; r < ranks; ++r) {
    const TensorSplit s = TensorSplit::Make(c, lm_head_fractures, r, ranks);
    auto check = [&](WeightGroup g, const std::string& what, const char* dim, int64_t b, int64_t e,
                     int64_t extent) {
      if (!bfp(g) ||
          SliceKeepsBlocks(*spec.Of(g), std::string_view(dim) == "columns", b, e, extent))
        return;
      throw Error(Cat("--weights ", spec.ToString(), " with --tensor-parallel ", ranks, ": rank ",
                      r, "'s slice of ", what, " (", dim, " [", b, ", ", e, ") of ", extent,
                      ") does not fall on whole block-float tiles (32 x 32); choose another "
                      "--tensor-parallel or hold ",
                      WeightGroupName(g), " in bf16 or f32 (--weights ", WeightGroupName(g),
                      "=bf16)"));
    };
    for (const TensorEntry& e : entries) {
      const TensorSlice sl = SliceOf(c, s, e);
      const WeightGroup g = *GroupOfRole(e.role);
      for (const auto& [b, end] : sl.rows) check(g, e.name, "rows", b, end, e.shape[0]);
      check(g, e.name, "columns", sl.col_begin, sl.col_end, e.shape[1]);
    }
    check(WeightGroup::kLmHead, "the LM head", "rows", s.vocab_begin, s.vocab_end, c.vocab_size);
  }
}

ModelWeights ModelWeights::Load(const ModelConfig& c, const std::string& dir,
                                const TensorSplit& split) {
  ModelWeights w;
  w.split = split;
  w.checkpoint = Checkpoint::Open(dir, c);
  const Checkpoint& ck = *w.checkpoint;
  const int64_t h = c.hidden_size;
  const std::vector<TensorEntry> entries = ModelTensors(c);
  const TensorEntry& embd = entries.front();
  WC_CHECK(embd.role == TensorRole::kTokenEmbd, "the table starts with the embeddings");
  w.embeddings = AsMatrix(ck.GetMatrix(embd.name, embd.shape));
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
  // The rank's slice of one matrix: its rows (several ranges gathered into one matrix) and columns.
  auto slice = [&](const TensorEntry& e, const TensorSlice& sl, WeightGroup g) {
    if (stored_bfp(g))
      return tiles(e.name, g, e.shape[0], e.shape[1], sl.rows, sl.col_begin, sl.col_end);
    const MatrixRef all = AsMatrix(ck.GetMatrix(e.name, e.shape));
    MatrixRef m;
    if (sl.rows.size() == 1) {
      m = Rows(all, sl.rows[0].first, sl.rows[0].second);
    } else {  // several ranges: gathered into one matrix
      const int64_t row_bytes = MatrixRowBytes(all);
      std::vector<uint8_t> rows;
      for (const auto& [r0, r1] : sl.rows) {
        const auto* src = static_cast<const uint8_t*>(all.data) + r0 * row_bytes;
        rows.insert(rows.end(), src, src + (r1 - r0) * row_bytes);
      }
      m = all;
      m.rows = static_cast<int64_t>(rows.size()) / row_bytes;
      w.gathered.push_back(std::move(rows));
      m.data = w.gathered.back().data();
    }
    return Cols(m, sl.col_begin, sl.col_end, e.name);
  };
  // The rank's elements of one vector.
  auto vec = [&](const TensorEntry& e, const TensorSlice& sl) {
    const std::vector<float> all = ToF32(ck.Get(e.name, e.shape));
    std::vector<float> out;
    for (const auto& [b, end] : sl.rows) out.insert(out.end(), all.begin() + b, all.begin() + end);
    return out;
  };

  w.lm_head_name = OutputName(c);
  w.lm_head_tied = !ck.Has(w.lm_head_name);
  const TensorEntry output{TensorRole::kOutput, -1, w.lm_head_name, {c.vocab_size, h}};
  if (!w.lm_head_tied && stored_bfp(WeightGroup::kLmHead)) {
    w.lm_head = slice(output, SliceOf(c, split, output), WeightGroup::kLmHead);
  } else if (stored_bfp(WeightGroup::kLmHead)) {
    throw Error(Cat(ck.source(), ": missing tensor '", w.lm_head_name, "' (config.json's ",
                    kStoredWeightsKey, " stores lm_head in ",
                    WeightFormatName(*stored_bfp(WeightGroup::kLmHead)), ")"));
  } else if (!w.lm_head_tied) {
    w.lm_head = Rows(AsMatrix(ck.GetMatrix(w.lm_head_name, output.shape)), split.vocab_begin,
                     split.vocab_end);
  } else if (!c.tie_word_embeddings) {
    throw Error(Cat(ck.source(), ": missing tensor '", w.lm_head_name,
                    "' (config.json sets tie_word_embeddings false)"));
  } else {
    w.lm_head = Rows(w.embeddings, split.vocab_begin, split.vocab_end);
    w.lm_head_name = embd.name;
  }

  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (const TensorEntry& e : entries) {
    if (e.role == TensorRole::kTokenEmbd || e.role == TensorRole::kOutput) continue;
    const TensorSlice sl = SliceOf(c, split, e);
    if (e.layer < 0) {  // the final norm
      (e.role == TensorRole::kOutputNorm ? w.final_norm.w : w.final_norm.b) = vec(e, sl);
      continue;
    }
    LayerWeights& L = w.layers[static_cast<size_t>(e.layer)];
    if (NormWeights* n = L.NormOf(e.role)) {
      (e.role == TensorRole::kAttnNorm || e.role == TensorRole::kMlpNorm ? n->w : n->b) =
          vec(e, sl);
      continue;
    }
    Linear* lin = L.LinearOf(e.role);
    WC_CHECK(lin != nullptr, "tensor ", e.name, " has a role no layer holds");
    if (IsMatrixRole(e.role)) {
      lin->name = e.name;
      lin->group = *GroupOfRole(e.role);
      lin->w = slice(e, sl, lin->group);
    } else {
      lin->b = vec(e, sl);
    }
  }
  return w;
}

}  // namespace wc
