// `wormchat convert` (model/convert.h) and loading its output (model/converted_checkpoint.h):
// a converted checkpoint loaded as stored gives logits bit-identical to --weights SPEC on the
// original (bfp8, bfp4, mixed; tied and untied heads; shapes that are not multiples of 32); its
// tensors are exactly tt-metal's tiles (PackBfpMatrix of the weight, and one tile checked against
// PackBfpTile of the transposed values); tensor parallel on it equals one process; double rounding,
// a converted --out and damaged files (each check) are refused naming the tensor.
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dist/thread_group.h"
#include "kernels/gemm/bfp/bfp_weights.h"
#include "model/checkpoint.h"
#include "model/convert.h"
#include "model/converted_checkpoint.h"
#include "model/decoder_model.h"
#include "model/tensor_parallel.h"
#include "tests/model/on_ranks.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {
namespace {

ModelOptions ConvertOptions(const std::string& spec,
                            ActivationPrecision p = ActivationPrecision::kBF16) {
  ModelOptions o;
  o.matmul_precision = p;
  o.weights = WeightSpec::Parse(spec);
  return o;
}

// Logits [n, vocab] of the prompt fed whole (f32 KV cache), then of one decode step.
std::vector<float> Logits(const DecoderModel& model, const std::vector<int>& ids) {
  KVCacheOptions kv;
  kv.dtype = KVDType::kF32;
  kv.journal = !model.split().whole();
  KVCache cache(model.CacheShape(1, model.config().max_position_embeddings), kv);
  TokenBatch b;
  for (size_t i = 0; i < ids.size(); ++i) b.Add(ids[i], 0, static_cast<int>(i), true);
  std::vector<float> all, logits;
  EXPECT_TRUE(model.Forward(b, cache, &all));
  TokenBatch next;
  next.Add(ids[0], 0, static_cast<int>(ids.size()), true);
  EXPECT_TRUE(model.Forward(next, cache, &logits));
  all.insert(all.end(), logits.begin(), logits.end());
  return all;
}

std::string Convert(const std::string& from, const test::TempDir& dir, const std::string& spec) {
  const std::string out = dir.File("converted");
  ConvertCheckpoint(from, out, WeightSpec::Parse(spec));
  return out;
}

// mq_bias_bf16: hidden 80, vocab 503 (no multiple of 32), tied; mq_f32: untied, F32;
// newarch_gqa_f32: tied, F32 (a tied head in bf16 or bfp is split out).
const char* kConvertFixtures[] = {"mq_bias_bf16", "mq_f32", "newarch_gqa_f32"};
const char* kConvertSpecs[] = {"bfp8", "bfp4", "attn=bfp8,mlp=bfp4,lm_head=bf16", "lm_head=bfp4"};

TEST(Convert, LoadsBitIdenticalToWeightsSpecOnTheOriginal) {
  for (const char* fixture : kConvertFixtures) {
    const std::string dir = test::FixtureDir(fixture);
    const std::vector<int> ids = test::ReadFixtureIds(dir);
    for (const char* spec : kConvertSpecs) {
      test::TempDir tmp;
      const std::string out = Convert(dir, tmp, spec);
      for (ActivationPrecision p : {ActivationPrecision::kBF16, ActivationPrecision::kF32}) {
        if (p == ActivationPrecision::kF32 && std::string(spec) != "bfp4") continue;  // CI time
        const auto want = DecoderModel::Load(dir, ConvertOptions(spec, p));
        const auto got = DecoderModel::Load(out, ConvertOptions("auto", p));
        EXPECT_EQ(Logits(*got, ids), Logits(*want, ids)) << fixture << " " << spec;
        // Asking for the stored format again is the same load.
        if (std::string(spec) == "bfp8") {
          EXPECT_EQ(Logits(*DecoderModel::Load(out, ConvertOptions("bfp8", p)), ids),
                    Logits(*want, ids));
        }
      }
    }
  }
}

TEST(Convert, WritesTtMetalTilesAndTheFormatDescription) {
  const std::string dir = test::FixtureDir("mq_bias_bf16");  // tied, hidden 80
  test::TempDir tmp;
  const std::string out = Convert(dir, tmp, "attn=bfp4,mlp=bfp8");
  const nlohmann::json config = ReadJsonFile(out + "/config.json");
  EXPECT_EQ(config["wormchat_weights"],
            (nlohmann::json{{"attn", "bfp4"}, {"mlp", "bfp8"}, {"lm_head", "bf16"}}));
  EXPECT_FALSE(config.contains("tie_word_embeddings") && config["tie_word_embeddings"] == false);
  EXPECT_EQ(test::ReadFile(out + "/ids.txt"), test::ReadFile(dir + "/ids.txt"));  // companions
  const auto src = Checkpoint::Open(dir);                                         // two shards
  const SafetensorsFile dst(out + "/model.safetensors");
  EXPECT_EQ(dst.tensors().count("lm_head.weight"), 0u);  // bf16 head = the embeddings: still tied
  const std::map<std::string, WeightGroup> groups = MatrixGroups(LoadConfig(dir));
  for (const std::string& name : src->names()) {
    const TensorInfo& t = src->Raw(name);
    const TensorInfo& c = dst.tensors().at(name);
    const std::optional<WeightGroup> g =
        groups.count(name) ? std::optional<WeightGroup>(groups.at(name)) : std::nullopt;
    if (!g) {  // unchanged
      EXPECT_EQ(c.dtype_name, t.dtype_name) << name;
      EXPECT_EQ(c.shape, t.shape) << name;
      EXPECT_EQ(0, std::memcmp(c.data, t.data, t.n_bytes)) << name;
      continue;
    }
    const BfpFormat f = *g == WeightGroup::kAttn ? BfpFormat::kBfp4 : BfpFormat::kBfp8;
    const BfpLayout layout{f, t.shape[0], t.shape[1]};
    EXPECT_EQ(dst.metadata().at(name + ".format"), BfpFormatName(f)) << name;
    EXPECT_EQ(dst.metadata().at(name + ".shape"), ShapeString(t.shape)) << name;
    EXPECT_EQ(c.dtype_name, "U8") << name;
    EXPECT_EQ(c.shape, (std::vector<int64_t>{layout.k_tiles(), layout.n_tiles(), BfpTileBytes(f)}))
        << name;
    const MatrixRef w{t.dtype, t.shape[0], t.shape[1], t.shape[1], t.data};
    std::vector<uint8_t> packed(static_cast<size_t>(layout.bytes()));
    PackBfpMatrix(f, w, name, packed.data());
    ASSERT_EQ(c.n_bytes, packed.size()) << name;
    EXPECT_EQ(0, std::memcmp(c.data, packed.data(), packed.size())) << name;
    // The last tile (tk, tn), padded in both K and N, by hand: bits[k][n] = W[n][k] or 0.
    const int64_t tk = layout.k_tiles() - 1, tn = layout.n_tiles() - 1;
    uint32_t bits[32 * 32];
    for (int64_t k = 0; k < 32; ++k)
      for (int64_t n = 0; n < 32; ++n) {
        const int64_t row = 32 * tn + n, col = 32 * tk + k;
        float v = 0;
        if (row < t.shape[0] && col < t.shape[1]) {
          uint16_t hbits;
          std::memcpy(&hbits, t.data + 2 * (row * t.shape[1] + col), 2);
          v = BF16ToF32(hbits);
        }
        std::memcpy(&bits[k * 32 + n], &v, 4);
      }
    std::vector<uint8_t> tile(static_cast<size_t>(BfpTileBytes(f)));
    PackBfpTile(f, bits, tile.data());
    EXPECT_EQ(0, std::memcmp(c.data + layout.TileOffset(tk, tn), tile.data(), tile.size())) << name;
  }
}

// Rank 0's logits over 2 ranks as threads, each loading its slice of `dir` under `spec`.
std::vector<float> TwoRanks(const std::string& dir, const std::string& spec) {
  std::vector<float> got;
  test::OnRanks(dir, 2, ConvertOptions(spec, ActivationPrecision::kF32),
                [&](const DecoderModel& model) { got = Logits(model, test::ReadFixtureIds(dir)); });
  return got;
}

// Each rank holds whole tiles of the converted tensors (mq_f32: multi-query, so a rank's QKV rows
// come from two tile ranges; 4 heads of 16 split at 32 rows, the MLP at 128, the LM head's
// fractures at 256): the ranks give the bits of the original under --weights SPEC on 2 ranks.
TEST(Convert, TensorParallelOnAConvertedCheckpointSlicesWholeTiles) {
  const std::string dir = test::FixtureDir("mq_f32");
  test::TempDir tmp;
  for (const char* spec : {"bfp8", "attn=bfp4,mlp=bfp8,lm_head=bf16"}) {
    const std::string out = tmp.File(Cat("c", spec[0] == 'b' ? 8 : 4));
    ConvertCheckpoint(dir, out, WeightSpec::Parse(spec));
    std::filesystem::copy_file(dir + "/ids.txt", out + "/ids.txt",
                               std::filesystem::copy_options::skip_existing);
    const std::vector<float> got = TwoRanks(out, "auto");
    EXPECT_FALSE(got.empty());
    EXPECT_EQ(got, TwoRanks(dir, spec)) << spec;
  }
}

TEST(Convert, RefusesDoubleRoundingAndABadOut) {
  const std::string dir = test::FixtureDir("mq_bias_bf16");
  test::TempDir tmp;
  const std::string out = Convert(dir, tmp, "attn=bfp8");
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (const char* spec : {"bfp4", "attn=bf16", "f32"}) {
    const std::string m = message([&] { DecoderModel::Load(out, ConvertOptions(spec)); });
    EXPECT_EQ(m.rfind("--weights", 0), 0u) << m;
    EXPECT_NE(m.find("stores attn in bfp8"), std::string::npos) << m;
  }
  // Groups stored as bf16 still take any format.
  EXPECT_NO_THROW(DecoderModel::Load(out, ConvertOptions("mlp=bfp4,lm_head=f32")));
  EXPECT_NE(message([&] {
              ConvertCheckpoint(out, tmp.File("again"), WeightSpec::Parse("bfp4"));
            }).find("already in block float"),
            std::string::npos);
  EXPECT_NE(message([&] {
              ConvertCheckpoint(dir, out, WeightSpec::Parse("bfp4"));
            }).find("--out " + out + " exists and is not empty"),
            std::string::npos);
  EXPECT_NE(message([&] {
              ConvertCheckpoint(dir, dir, WeightSpec::Parse("bfp4"));
            }).find("is the model directory"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(tmp.File("again")));
}

// A converted checkpoint's tensors and metadata, rewritten with one change.
struct Rewrite {
  std::map<std::string, std::string> metadata;
  std::vector<TensorToWrite> tensors;
  std::vector<std::vector<uint8_t>> data;
};

Rewrite ReadBack(const SafetensorsFile& f) {
  Rewrite r;
  r.metadata = f.metadata();
  r.metadata.erase("format");
  r.data.reserve(f.tensors().size());
  for (const auto& [name, t] : f.tensors()) {
    r.data.emplace_back(t.data, t.data + t.n_bytes);
    r.tensors.push_back(
        {name, DType::kF32, t.shape, r.data.back().data(), nullptr, t.dtype_name.c_str()});
  }
  return r;
}

TEST(Convert, DamagedFilesAreRefusedNamingTheTensor) {
  const std::string dir = test::FixtureDir("mq_f32");
  test::TempDir tmp;
  const std::string good = Convert(dir, tmp, "bfp8");
  const std::string qkv = "transformer.h.1.self_attention.query_key_value.weight";
  const SafetensorsFile file(good + "/model.safetensors");
  struct Case {
    const char* what;
    std::function<void(Rewrite&, nlohmann::json&)> damage;
    const char* needle;
  };
  auto tensor = [&](Rewrite& r) -> TensorToWrite& {
    for (auto& t : r.tensors)
      if (t.name == qkv) return t;
    throw Error("no qkv");
  };
  const std::vector<Case> cases = {
      {"truncated", [&](Rewrite& r, nlohmann::json&) { tensor(r).shape[0] -= 1; },
       "is not the bfp8 tiles"},
      {"not U8", [&](Rewrite& r, nlohmann::json&) { tensor(r).raw_dtype = "I8"; },
       "is not the bfp8 tiles"},
      {"unknown format", [&](Rewrite& r, nlohmann::json&) { r.metadata[qkv + ".format"] = "bfp6"; },
       "unknown block-float format 'bfp6'"},
      {"missing format", [&](Rewrite& r, nlohmann::json&) { r.metadata.erase(qkv + ".format"); },
       "no \""},
      {"shape against config",
       [&](Rewrite& r, nlohmann::json&) { r.metadata[qkv + ".shape"] = "[96, 65]"; },
       "disagrees with config.json's [96, 64]"},
      {"unreadable shape", [&](Rewrite& r, nlohmann::json&) { r.metadata[qkv + ".shape"] = "96"; },
       ".shape\": \"[out, in]\""},
      {"config format",
       [&](Rewrite& r, nlohmann::json& c) {
         for (auto& [k, v] : r.metadata)
           if (k.size() > 7 && k.substr(k.size() - 7) == ".format" && k.find("mlp") != k.npos)
             v = "bfp4";
         c["wormchat_weights"]["mlp"] = "bfp8";
       },
       "__metadata__ says bfp4 but config.json's wormchat_weights says bfp8"},
      {"exponent 255",
       [&](Rewrite& r, nlohmann::json&) {
         auto& t = tensor(r);
         for (auto& d : r.data)
           if (d.data() == t.data) d[5] = 255;
       },
       "exponent of 255"},
  };
  for (const Case& c : cases) {
    test::TempDir bad_dir;
    test::CopyDir(good, bad_dir.path());
    Rewrite r = ReadBack(file);
    nlohmann::json config = ReadJsonFile(good + "/config.json");
    c.damage(r, config);
    test::WriteFile(bad_dir.File("config.json"), config.dump());
    WriteSafetensors(bad_dir.File("model.safetensors"), r.tensors, r.metadata);
    try {
      DecoderModel::Load(bad_dir.path(), ConvertOptions("auto"));
      ADD_FAILURE() << c.what << ": loaded";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(c.needle), std::string::npos) << c.what << ": " << m;
      EXPECT_NE(m.find("transformer.h."), std::string::npos) << c.what << ": " << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

}  // namespace
}  // namespace wc
