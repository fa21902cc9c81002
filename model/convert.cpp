#include "model/convert.h"

#include "model/tensor_table.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

#include "kernels/gemm/bfp/bfp_weights.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/converted_checkpoint.h"
#include "model/gguf/ggml_types.h"
#include "model/gguf/gguf_config.h"
#include "model/gguf/gguf_file.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

namespace fs = std::filesystem;

constexpr size_t kChunkBytes = size_t{64} << 20;  // source read between two page releases

MatrixRef TensorMatrix(const TensorInfo& t) {
  return MatrixRef{t.dtype, t.shape[0], t.shape[1], t.shape[1], t.data};
}

// dst[0:n] = src[0:n], the source's pages released chunk by chunk.
void CopyReleasing(const uint8_t* src, size_t n, uint8_t* dst) {
  for (size_t at = 0; at < n; at += kChunkBytes) {
    const size_t len = std::min(kChunkBytes, n - at);
    std::memcpy(dst + at, src + at, len);
    ReleaseMappedPages(src + at, len);
  }
}

// out = t's values in `to` (F32 or BF16; BF16 rounded to nearest even), chunk by chunk.
void ConvertReleasing(const TensorInfo& t, DType to, uint8_t* out) {
  const int64_t n = t.numel(), in_size = DTypeSize(t.dtype);
  const int64_t chunk = static_cast<int64_t>(kChunkBytes) / in_size;
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t i1 = std::min(n, i0 + chunk);
#pragma omp parallel for schedule(static)
    for (int64_t i = i0; i < i1; ++i) {
      float v;
      if (t.dtype == DType::kF32) {
        std::memcpy(&v, t.data + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        v = t.dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
      }
      if (to == DType::kF32) {
        std::memcpy(out + 4 * i, &v, 4);
      } else {
        const uint16_t h = F32ToBF16(v);
        std::memcpy(out + 2 * i, &h, 2);
      }
    }
    ReleaseMappedPages(t.data + i0 * in_size, static_cast<size_t>((i1 - i0) * in_size));
  }
}

// The tensor `name` written from source t (a matrix [out, in]) in format f.
TensorToWrite MatrixIn(const std::string& name, const TensorInfo& t, WeightFormat f,
                       std::map<std::string, std::string>& metadata) {
  if (IsBfp(f)) {
    const BfpLayout layout{BfpOf(f), t.shape[0], t.shape[1]};
    metadata[name + ".format"] = BfpFormatName(layout.format);
    metadata[name + ".shape"] = ShapeString({layout.out, layout.in});
    TensorToWrite w{name,    DType::kF32, {layout.k_tiles(), layout.n_tiles(), layout.tile_bytes()},
                    nullptr, nullptr,     "U8"};
    w.fill = [&t, layout, name](uint8_t* out) {
      const MatrixRef m = TensorMatrix(t);
      const int64_t row_bytes = m.cols * DTypeSize(m.dtype);
      PackBfpMatrix(layout.format, m, name, out, [&](int64_t r0, int64_t r1) {
        ReleaseMappedPages(t.data + r0 * row_bytes, static_cast<size_t>((r1 - r0) * row_bytes));
      });
    };
    return w;
  }
  if (f == FormatOfDType(t.dtype)) {
    TensorToWrite w{name, t.dtype, t.shape, nullptr, nullptr};
    w.fill = [&t](uint8_t* out) { CopyReleasing(t.data, t.n_bytes, out); };
    return w;
  }
  WC_CHECK(f == WeightFormat::kF32 || f == WeightFormat::kBF16, "convert to f32 or bf16");
  const DType to = f == WeightFormat::kF32 ? DType::kF32 : DType::kBF16;
  TensorToWrite w{name, to, t.shape, nullptr, nullptr};
  w.fill = [&t, to](uint8_t* out) { ConvertReleasing(t, to, out); };
  return w;
}

// Any tensor copied as it is (its own dtype, whatever it is).
TensorToWrite Unchanged(const TensorInfo& t) {
  TensorToWrite w{t.name, DType::kF32, t.shape, nullptr, nullptr, t.dtype_name.c_str()};
  w.fill = [&t](uint8_t* out) { CopyReleasing(t.data, t.n_bytes, out); };
  return w;
}

// --out: absent, or an empty directory, and not the model itself.
void CheckOut(const std::string& model_dir, const std::string& out_dir) {
  std::error_code ec;
  if (out_dir.empty()) throw Error("--out: an output directory is required");
  if (fs::exists(out_dir, ec) && fs::exists(model_dir, ec) &&
      fs::equivalent(out_dir, model_dir, ec))
    throw Error(Cat("--out ", out_dir, " is the model directory; choose a new directory"));
  if (!fs::exists(out_dir, ec)) return;
  if (!fs::is_directory(out_dir, ec))
    throw Error(Cat("--out ", out_dir, " exists and is not a directory; choose a new directory"));
  if (!fs::is_empty(out_dir, ec))
    throw Error(Cat("--out ", out_dir, " exists and is not empty; choose a new directory"));
}

// A GGUF file's tokenizer.chat_template (and its bos / eos tokens' text) as the
// tokenizer_config.json a checkpoint directory keeps it in; nothing without one. The vocabulary
// (tokenizer.ggml.*) is not written: no tokenizer file format of a directory holds it as it is.
void WriteGgufChatTemplate(const std::string& path, const std::string& dir) {
  const std::shared_ptr<const GgufFile> file = OpenGgufFile(path);
  const GgufFile& g = *file;
  if (g.Find("tokenizer.chat_template") == nullptr) return;
  nlohmann::json j = {{"chat_template", g.String("tokenizer.chat_template")}};
  if (g.Find("tokenizer.ggml.tokens") != nullptr)
    for (const char* id : {"bos", "eos"}) {
      const std::string key = Cat("tokenizer.ggml.", id, "_token_id");
      const std::vector<std::string>& tokens = g.Strings("tokenizer.ggml.tokens");
      if (g.Find(key) == nullptr) continue;
      const int64_t i = g.Int(key);
      if (i >= 0 && i < static_cast<int64_t>(tokens.size()))
        j[Cat(id, "_token")] = tokens[static_cast<size_t>(i)];
    }
  const std::string out = JoinPath(dir, "tokenizer_config.json");
  std::ofstream f(out, std::ios::binary);
  f << j.dump(2) << "\n";
  if (!f) throw Error(Cat(out, ": cannot write"));
}

}  // namespace

ConvertSummary ConvertCheckpoint(const std::string& model_dir, const std::string& out_dir,
                                 const WeightSpec& spec, const ConvertProgress& progress,
                                 bool allow_requantize) {
  const bool gguf = IsGgufModel(model_dir);
  CheckOut(model_dir, out_dir);
  const ModelConfig c = LoadConfig(model_dir);
  const std::string config_path = JoinPath(model_dir, "config.json");
  nlohmann::json config =
      gguf ? ConfigJsonFromGguf(*OpenGgufFile(model_dir)) : ReadJsonFile(config_path);
  const std::optional<WeightSpec> stored =
      gguf ? std::nullopt : StoredWeightFormats(config, config_path);
  if (stored && stored->any_bfp())
    throw Error(Cat(model_dir, " is already in block float (", kStoredWeightsKey, " ",
                    stored->ToString(),
                    "); converting it again would round twice: convert the "
                    "original checkpoint"));
  // A GGUF file's quantized tensors are read as stored and dequantized one at a time as written.
  const auto ck = Checkpoint::Open(model_dir, c);
  for (const auto& [key, value] : ck->metadata())
    if (key.size() > 7 && key.compare(key.size() - 7, 7, ".format") == 0 &&
        ck->Has(key.substr(0, key.size() - 7)))
      throw Error(Cat(ck->source(), ": tensor '", key.substr(0, key.size() - 7),
                      "' is already in block float (", Printable(value),
                      "); converting it again would round twice: convert the original checkpoint"));
  // Each quantized tensor's stand-in: an F32 tensor whose data is set while it is written.
  std::map<std::string, std::unique_ptr<TensorInfo>> f32_of;
  for (const std::string& name : ck->names()) {
    const TensorInfo& t = ck->Raw(name);
    if (t.readable || FindGgmlTypeNamed(t.dtype_name) == nullptr) continue;
    auto f = std::make_unique<TensorInfo>(t);
    f->dtype_name = "F32";
    f->dtype = DType::kF32;
    f->readable = true;
    f->data = nullptr;
    f->n_bytes = static_cast<size_t>(t.numel()) * 4;
    f32_of.emplace(name, std::move(f));
  }
  // The tensor as written: a quantized one's F32 stand-in, any other as stored.
  auto source = [&](const std::string& name) -> const TensorInfo& {
    const auto it = f32_of.find(name);
    return it != f32_of.end() ? *it->second : ck->Raw(name);
  };
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) -> const TensorInfo& {
    return f32_of.count(name) ? source(name) : ck->Get(name, shape);
  };

  // Each group's format, from its first matrix's dtype (shapes checked against config.json).
  const int64_t h = c.hidden_size;
  const std::vector<TensorEntry> table = ModelTensors(c);
  const TensorEntry& embd = table.front();  // the table starts with the embeddings
  const TensorInfo& emb = get(embd.name, embd.shape);
  const std::map<std::string, WeightGroup> groups = MatrixGroups(c);
  std::string lm_head_name;  // the untied LM head's name
  for (const auto& [name, g] : groups)
    if (g == WeightGroup::kLmHead) lm_head_name = name;
  const bool tied = !ck->Has(lm_head_name);
  // The first layer's first matrix of a group.
  auto first = [&](WeightGroup g) -> const TensorEntry& {
    for (const TensorEntry& e : table)
      if (e.layer == 0 && GroupOfRole(e.role) == g) return e;
    throw Error(Cat(model_dir, ": the layout has no ", WeightGroupName(g), " matrix"));
  };
  const TensorEntry& attn0 = first(WeightGroup::kAttn);
  const TensorEntry& mlp0 = first(WeightGroup::kMlp);
  const DType group_dtype[3] = {get(attn0.name, attn0.shape).dtype,
                                get(mlp0.name, mlp0.shape).dtype,
                                tied ? emb.dtype : get(lm_head_name, {c.vocab_size, h}).dtype};
  ConvertSummary summary;
  summary.from_gguf = gguf;
  for (WeightGroup g : kWeightGroups) {
    const WeightFormat f = spec.Resolve(g, group_dtype[static_cast<int>(g)]);
    (g == WeightGroup::kAttn  ? summary.stored.attn
     : g == WeightGroup::kMlp ? summary.stored.mlp
                              : summary.stored.lm_head) = f;
  }
  summary.lm_head_split = tied && *summary.stored.lm_head != FormatOfDType(emb.dtype);

  // A quantized matrix written in anything but f32 is rounded a second time.
  auto check_requantize = [&](const std::string& name, WeightFormat f) {
    if (!f32_of.count(name) || f == WeightFormat::kF32) return;
    summary.requantized = true;
    if (!allow_requantize)
      throw Error(Cat(model_dir, ": tensor '", name, "' is ", ck->Raw(name).dtype_name,
                      "; writing it as ", WeightFormatName(f),
                      " rounds it twice (dequantized, then rounded again): --weights f32 is "
                      "exact, or pass --allow-requantize"));
  };
  std::map<std::string, std::string> metadata;
  std::vector<TensorToWrite> tensors;
  std::vector<std::string> from;  // the source tensor of each of `tensors`
  for (const std::string& name : ck->names()) {
    const TensorInfo& t = source(name);
    const auto g = groups.find(name);
    if (g != groups.end() && t.readable && t.shape.size() == 2) {
      const WeightFormat f = spec.Resolve(g->second, t.dtype);
      check_requantize(name, f);
      tensors.push_back(MatrixIn(name, t, f, metadata));
    } else {
      tensors.push_back(Unchanged(t));
    }
    from.push_back(name);
  }
  if (summary.lm_head_split) {
    check_requantize(embd.name, *summary.stored.lm_head);
    tensors.push_back(MatrixIn(lm_head_name, emb, *summary.stored.lm_head, metadata));
    from.push_back(embd.name);
  }
  // A quantized source's values exist only while its tensor is written.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto it = f32_of.find(from[i]);
    if (it == f32_of.end()) continue;
    TensorInfo* f32 = it->second.get();
    const TensorInfo* q = &ck->Raw(from[i]);
    tensors[i].fill = [fill = std::move(tensors[i].fill), f32, q](uint8_t* out) {
      const int64_t row_len = q->shape.back();
      const std::vector<float> values =
          DequantizeRows(*FindGgmlTypeNamed(q->dtype_name), q->data, q->numel() / row_len, row_len);
      f32->data = reinterpret_cast<const uint8_t*>(values.data());
      fill(out);
      f32->data = nullptr;
    };
  }
  int64_t total = 0;
  for (const std::string& name : ck->names()) total += static_cast<int64_t>(ck->Raw(name).n_bytes);
  if (summary.lm_head_split) total += static_cast<int64_t>(ck->Raw(embd.name).n_bytes);
  summary.bytes_in = total;
  int64_t done = 0;
  for (TensorToWrite& w : tensors) {
    summary.bytes_out += w.bytes();
    const int64_t in_bytes = w.name == lm_head_name && summary.lm_head_split
                                 ? static_cast<int64_t>(ck->Raw(embd.name).n_bytes)
                                 : static_cast<int64_t>(ck->Raw(w.name).n_bytes);
    w.fill = [fill = std::move(w.fill), in_bytes, total, &done, &progress](uint8_t* out) {
      fill(out);
      done += in_bytes;
      if (progress) progress(done, total);
    };
  }

  config[kStoredWeightsKey] = {{"attn", WeightFormatName(*summary.stored.attn)},
                               {"mlp", WeightFormatName(*summary.stored.mlp)},
                               {"lm_head", WeightFormatName(*summary.stored.lm_head)}};
  if (summary.lm_head_split) config["tie_word_embeddings"] = false;

  // Built beside --out and renamed to it when complete.
  std::string out = out_dir;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  const std::string partial = Cat(out, ".partial-", getpid());
  std::error_code ec;
  fs::remove_all(partial, ec);
  if (!fs::create_directories(partial, ec) && !fs::is_directory(partial))
    throw Error(Cat("--out ", out_dir, ": cannot create ", partial, ": ", ec.message()));
  try {
    if (progress) progress(0, total);
    if (gguf) WriteGgufChatTemplate(model_dir, partial);
    // A directory's other files (tokenizer, chat format, generation config, ...) copied.
    for (const auto& entry : fs::directory_iterator(gguf ? partial : model_dir)) {
      const std::string file = entry.path().filename().string();
      const bool weights = file == "config.json" || file == "model.safetensors.index.json" ||
                           (file.size() > 12 && file.substr(file.size() - 12) == ".safetensors");
      if (gguf || weights || !entry.is_regular_file()) continue;
      fs::copy_file(entry.path(), JoinPath(partial, file));
    }
    {
      const std::string path = JoinPath(partial, "config.json");
      std::ofstream f(path, std::ios::binary);
      f << config.dump(2) << "\n";
      if (!f) throw Error(Cat(path, ": cannot write"));
    }
    WriteSafetensors(JoinPath(partial, "model.safetensors"), tensors, metadata);
    fs::rename(partial, out);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(partial, ec);
    throw Error(Cat("--out ", out_dir, ": ", e.code().message(), " (", e.path1().string(), ")"));
  } catch (...) {
    fs::remove_all(partial, ec);
    throw;
  }
  return summary;
}

}  // namespace wc
