#include "model/converted_checkpoint.h"

#include <cstring>

#include "model/gguf/gguf_config.h"
#include "model/tensor_table.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

// "[out, in]" -> {out, in}; nullopt unless exactly two non-negative integers.
std::optional<std::pair<int64_t, int64_t>> ParseShape(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.size() != 2 || !j[0].is_number_unsigned() || !j[1].is_number_unsigned())
    return std::nullopt;
  return std::make_pair(j[0].get<int64_t>(), j[1].get<int64_t>());
}

}  // namespace

std::map<std::string, WeightGroup> MatrixGroups(const ModelConfig& c) {
  ModelConfig untied = c;  // the LM head's name even when tied
  untied.tie_word_embeddings = false;
  std::map<std::string, WeightGroup> groups;
  for (const TensorEntry& e : ModelTensors(untied))
    if (const std::optional<WeightGroup> g = GroupOfRole(e.role)) groups.emplace(e.name, *g);
  return groups;
}

std::optional<WeightSpec> StoredWeightFormats(const nlohmann::json& config,
                                              const std::string& source) {
  if (!config.is_object() || !config.contains(kStoredWeightsKey)) return std::nullopt;
  const nlohmann::json& j = config[kStoredWeightsKey];
  const std::string where = Cat(source, ": '", kStoredWeightsKey, "'");
  if (!j.is_object())
    throw Error(Cat(where, " must be an object naming the format of attn, mlp and lm_head"));
  WeightSpec spec;
  for (WeightGroup g : kWeightGroups) {
    const char* group = WeightGroupName(g);
    const auto it = j.find(group);
    if (it == j.end() || !it->is_string())
      throw Error(Cat(where, " has no format for '", group, "'"));
    const std::optional<WeightFormat> f = WeightFormatFromName(it->get<std::string>());
    if (!f)
      throw Error(Cat(where, ": unknown format '", Printable(it->get<std::string>()), "' for '",
                      group, "'; expected f32, f16, bf16, bfp8 or bfp4"));
    (g == WeightGroup::kAttn ? spec.attn : g == WeightGroup::kMlp ? spec.mlp : spec.lm_head) = f;
  }
  for (const auto& [key, value] : j.items())
    if (key != "attn" && key != "mlp" && key != "lm_head")
      throw Error(Cat(where, ": unknown group '", Printable(key), "'"));
  return spec;
}

std::optional<WeightSpec> ReadStoredWeightFormats(const std::string& model_dir) {
  if (IsGgufModel(model_dir)) return std::nullopt;  // GGUF holds GGML types, never tt-metal tiles
  const std::string path = JoinPath(model_dir, "config.json");
  return StoredWeightFormats(ReadJsonFile(path), path);
}

WeightSpec EffectiveWeightSpec(const std::optional<WeightSpec>& stored, const WeightSpec& asked,
                               const std::string& model_dir) {
  if (!stored) return asked;
  WeightSpec spec = asked;
  for (WeightGroup g : kWeightGroups) {
    const WeightFormat s = *stored->Of(g);
    if (!IsBfp(s)) continue;
    const std::optional<WeightFormat> a = asked.Of(g);
    if (a && *a != s)
      throw Error(Cat(
          "--weights ", asked.ToString(), ": ", model_dir, " stores ", WeightGroupName(g), " in ",
          WeightFormatName(s), " (converted); block-float weights are not converted again (",
          WeightFormatName(*a), " would ", IsBfp(*a) ? "round them twice" : "only widen them",
          "): load it with --weights auto (as stored), or convert the original"));
    (g == WeightGroup::kAttn ? spec.attn : g == WeightGroup::kMlp ? spec.mlp : spec.lm_head) = s;
  }
  return spec;
}

StoredTiles StoredTiles::Bind(const Checkpoint& ck, const std::string& name, WeightFormat f,
                              int64_t out, int64_t in,
                              const std::vector<std::pair<int64_t, int64_t>>& row_ranges,
                              int64_t col_begin, int64_t col_end) {
  WC_CHECK(IsBfp(f), "StoredTiles of a bfp format");
  const TensorInfo& t = ck.Raw(name);
  const std::string where = Cat(t.file, ": tensor '", name, "'");
  const auto& meta = ck.metadata();
  const auto fmt = meta.find(name + ".format");
  if (fmt == meta.end())
    throw Error(Cat(where, ": no \"", name, ".format\" in __metadata__ (config.json's ",
                    kStoredWeightsKey, " stores it as ", WeightFormatName(f), ")"));
  const std::optional<BfpFormat> bf = BfpFormatFromName(fmt->second);
  if (!bf)
    throw Error(Cat(where, ": unknown block-float format '", Printable(fmt->second),
                    "' in __metadata__; expected bfp8 or bfp4"));
  if (*bf != BfpOf(f))
    throw Error(Cat(where, ": __metadata__ says ", BfpFormatName(*bf), " but config.json's ",
                    kStoredWeightsKey, " says ", WeightFormatName(f)));
  const auto shape = meta.find(name + ".shape");
  const std::optional<std::pair<int64_t, int64_t>> oi =
      shape == meta.end() ? std::nullopt : ParseShape(shape->second);
  if (!oi)
    throw Error(Cat(where, ": __metadata__ needs \"", name, ".shape\": \"[out, in]\"",
                    shape == meta.end() ? "" : Cat(", got '", Printable(shape->second), "'")));
  if (oi->first != out || oi->second != in)
    throw Error(Cat(where, ": __metadata__ shape [", oi->first, ", ", oi->second,
                    "] disagrees with config.json's [", out, ", ", in, "]"));
  const BfpLayout whole{*bf, out, in};
  const std::vector<int64_t> want = {whole.k_tiles(), whole.n_tiles(), whole.tile_bytes()};
  if (t.dtype_name != "U8" || t.shape != want)
    throw Error(Cat(where, ": ", t.dtype_name, " ", ShapeString(t.shape), " is not the ",
                    BfpFormatName(*bf), " tiles of [", out, ", ", in, "] (U8 ", ShapeString(want),
                    ")"));
  StoredTiles s;
  s.source = t.data;
  s.source_bytes = t.n_bytes;
  auto aligned = [](int64_t b, int64_t e, int64_t extent) {
    return b % kBfpTileDim == 0 && (e % kBfpTileDim == 0 || e == extent) && b <= e && e <= extent;
  };
  s.slice.whole = whole;
  s.slice.tiles = t.data;
  for (size_t i = 0; i < row_ranges.size(); ++i) {
    const auto& [b, e] = row_ranges[i];
    WC_CHECK(aligned(b, e, out) && (i + 1 == row_ranges.size() || e % kBfpTileDim == 0),
             "bfp row slice off the tiles");
    s.slice.rows += e - b;
    for (int64_t tn = b / kBfpTileDim; tn < (e + kBfpTileDim - 1) / kBfpTileDim; ++tn)
      s.slice.tile_cols.push_back(tn);
  }
  WC_CHECK(aligned(col_begin, col_end, in), "bfp column slice off the tiles");
  s.slice.cols = col_end - col_begin;
  s.slice.tk_begin = col_begin / kBfpTileDim;
  s.layout = BfpLayout{*bf, s.slice.rows, s.slice.cols};
  return s;
}

PackedMatrix StoredTiles::Pack(std::optional<WeightFormat> asked,
                               ActivationPrecision bf16_precision, const std::string& name) const {
  const WeightFormat f =
      layout.format == BfpFormat::kBfp8 ? WeightFormat::kBfp8 : WeightFormat::kBfp4;
  if (asked && *asked != f)
    throw Error(Cat("--weights: ", name, " is stored as ", WeightFormatName(f),
                    " (converted); it is not converted again to ", WeightFormatName(*asked)));
  // The source's tile rows are released as they are used up, so loading holds the packed weights
  // and at most one block (about 8 MiB) of the mapping's pages more.
  const size_t row_bytes = static_cast<size_t>(slice.whole.TileOffset(1, 0));
  PackedMatrix m = PackedMatrix::FromBfpTiles(
      slice, bf16_precision, name, [&](int64_t tk_begin, int64_t tk_end) {
        ReleaseMappedPages(source + static_cast<size_t>(tk_begin) * row_bytes,
                           static_cast<size_t>(tk_end - tk_begin) * row_bytes);
      });
  ReleaseMappedPages(source, source_bytes);
  return m;
}

}  // namespace wc
