// --weights on the model (model/weight_spec.h): every format's logits against a reference run on a
// checkpoint that stores the format's values (bfp: DequantizeBfpMatrix(PackBfpMatrix(W)); bf16:
// W rounded to nearest even) in f32, with f32 products and an f32 KV cache (within 1e-4 relative;
// bfp exactly); bfp with bf16 activations bit-identical to the BF16 checkpoint of its decoded
// values (the block-float GEMM contract); a tied LM head converted while the embedding lookup keeps
// the embeddings; token by token == whole prompt == batched beside another row, on 1 and 2
// threads; and the spec's parsing, canonical text and one-line errors.
#include <omp.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <gtest/gtest.h>

#include "kernels/gemm/bfp/bfp_weights.h"
#include "model/decoder_model.h"
#include "model/safetensors.h"
#include "model/weight_spec.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/error.h"

namespace wc {
namespace {

// The --weights group of a checkpoint tensor, if it is one of the matrices.
std::optional<WeightGroup> GroupOf(const std::string& name) {
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (ends(".self_attention.query_key_value.weight") || ends(".self_attention.dense.weight"))
    return WeightGroup::kAttn;
  if (ends(".mlp.dense_h_to_4h.weight") || ends(".mlp.dense_4h_to_h.weight"))
    return WeightGroup::kMlp;
  if (name == "lm_head.weight") return WeightGroup::kLmHead;
  return std::nullopt;
}

std::vector<float> AsF32(const TensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == DType::kF32) {
      std::memcpy(&v[i], t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      v[i] = t.dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
    }
  }
  return v;
}

// The values of W [out, in] (stored as `stored`) in format f.
std::vector<float> InFormat(std::vector<float> w, int64_t out, int64_t in, WeightFormat f) {
  if (IsBfp(f)) {
    const BfpLayout layout{BfpOf(f), out, in};
    std::vector<uint8_t> packed(static_cast<size_t>(layout.bytes()));
    PackBfpMatrix(BfpOf(f), MatrixRef{DType::kF32, out, in, in, w.data()}, "w", packed.data());
    DequantizeBfpMatrix(layout, packed.data(), w.data());
  } else if (f == WeightFormat::kBF16) {
    for (float& v : w) v = BF16ToF32(F32ToBF16(v));
  }
  return w;
}

// Every tensor of a model directory (one model.safetensors or shards), pointing into mappings kept
// for the test's life.
std::map<std::string, TensorInfo> Tensors(const std::string& dir) {
  static std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, TensorInfo> all;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string path = entry.path().string();
    if (path.size() < 12 || path.compare(path.size() - 12, 12, ".safetensors") != 0) continue;
    files.push_back(std::make_unique<SafetensorsFile>(path));
    for (const auto& [name, t] : files.back()->tensors()) all[name] = t;
  }
  return all;
}

// Writes to `to` the checkpoint of `from` whose matrices hold their values under `spec`, every
// tensor as `dtype` (F32, or BF16 when every value is one), a tied LM head that `spec` converts
// written as its own lm_head.weight (the embeddings unchanged).
void WriteReference(const std::string& from, const std::string& to, const WeightSpec& spec,
                    DType dtype) {
  test::CopyDir(from, to);
  const std::map<std::string, TensorInfo> all = Tensors(from);
  std::vector<std::vector<uint8_t>> data;
  std::vector<TensorToWrite> tensors;
  auto add = [&](const std::string& name, const std::vector<int64_t>& shape,
                 const std::vector<float>& v) {
    std::vector<uint8_t> bytes(v.size() * DTypeSize(dtype));
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == DType::kF32) {
        std::memcpy(&bytes[4 * i], &v[i], 4);
      } else {
        const uint16_t h = F32ToBF16(v[i]);
        EXPECT_EQ(BF16ToF32(h), v[i]) << name;  // exactly a bf16
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    }
    data.push_back(std::move(bytes));
    tensors.push_back({name, dtype, shape, data.back().data(), {}});
  };
  const bool tied = all.count("lm_head.weight") == 0;
  for (const auto& [name, t] : all) {
    std::vector<float> v = AsF32(t);
    std::optional<WeightGroup> g = GroupOf(name);
    if (g && spec.Of(*g)) v = InFormat(std::move(v), t.shape[0], t.shape[1], *spec.Of(*g));
    if (tied && name == "transformer.word_embeddings.weight" && spec.lm_head)
      add("lm_head.weight", t.shape, InFormat(v, t.shape[0], t.shape[1], *spec.lm_head));
    add(name, t.shape, v);
  }
  for (const auto& entry : std::filesystem::directory_iterator(to))
    if (entry.path().string().find(".safetensors") != std::string::npos)
      std::filesystem::remove(entry.path());
  WriteSafetensors(to + "/model.safetensors", tensors);
}

ModelOptions Options(const std::string& spec, ActivationPrecision p) {
  ModelOptions o;
  o.matmul_precision = p;
  o.weights = WeightSpec::Parse(spec);
  o.interrupt_slice_macs = 1 << 12;  // matmuls in slices of rows, as a busy server runs them
  return o;
}

// Logits [n, vocab] of `ids`: fed whole, one token at a time, or whole in row 1 beside a different
// prompt in row 0 (batch). Each in a fresh f32 KV cache.
enum class Feed { kWhole, kOneByOne, kBatched };
std::vector<float> Logits(const DecoderModel& model, const std::vector<int>& ids, Feed feed) {
  KVCache cache(model.CacheShape(2, model.config().max_position_embeddings), KVDType::kF32);
  std::vector<float> all, logits;
  const int n = static_cast<int>(ids.size());
  if (feed == Feed::kOneByOne) {
    for (int i = 0; i < n; ++i) {
      TokenBatch b;
      b.Add(ids[static_cast<size_t>(i)], 0, i, true);
      EXPECT_TRUE(model.Forward(b, cache, &logits));
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  }
  TokenBatch b;
  if (feed == Feed::kBatched)
    for (int i = 0; i < n - 2; ++i) b.Add(ids[static_cast<size_t>(n - 1 - i)], 0, i, false);
  for (int i = 0; i < n; ++i) b.Add(ids[static_cast<size_t>(i)], 1, i, true);
  EXPECT_TRUE(model.Forward(b, cache, &all));
  return all;
}

const char* kSpecs[] = {
    "f32", "bf16", "bfp8", "bfp4", "attn=bfp8,mlp=bfp4,lm_head=bf16", "lm_head=bfp4", "mlp=bfp8"};

class WeightFormatsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(WeightFormatsTest, LogitsAreThoseOfTheFormatsValues) {
  const std::string dir = test::FixtureDir(GetParam());
  const std::vector<int> ids = test::ReadFixtureIds(dir);
  for (const char* text : kSpecs) {
    const WeightSpec spec = WeightSpec::Parse(text);
    test::TempDir ref_dir;
    WriteReference(dir, ref_dir.path(), spec, DType::kF32);
    const auto ref = DecoderModel::Load(ref_dir.path(), Options("auto", ActivationPrecision::kF32));
    const std::vector<float> want = Logits(*ref, ids, Feed::kWhole);
    const auto model = DecoderModel::Load(dir, Options(text, ActivationPrecision::kF32));
    const std::vector<float> got = Logits(*model, ids, Feed::kWhole);
    EXPECT_LE(test::RelMaxError(got, want), 1e-4) << GetParam() << " --weights " << text;
    if (spec.Of(WeightGroup::kAttn) && IsBfp(*spec.Of(WeightGroup::kAttn)) &&
        spec.attn == spec.mlp &&
        spec.mlp == spec.lm_head) {  // F32 panels of the same values, the same GEMM
      EXPECT_EQ(got, want) << GetParam() << " --weights " << text;
    }
  }
}

// Decode == prefill == batched beside another row, on 1 and 2 threads: the same bits, each format
// and matmul precision (int8: the bfp matrices in integers, bf16 as bf16).
TEST_P(WeightFormatsTest, TokenByTokenBatchAndThreadsGiveTheSameBits) {
  const std::string dir = test::FixtureDir(GetParam());
  const std::vector<int> ids = test::ReadFixtureIds(dir);
  const int saved = omp_get_max_threads();
  for (const char* text : {"bf16", "bfp8", "bfp4"})
    for (ActivationPrecision p :
         {ActivationPrecision::kF32, ActivationPrecision::kBF16, ActivationPrecision::kInt8}) {
      const auto model = DecoderModel::Load(dir, Options(text, p));
      omp_set_num_threads(1);
      const std::vector<float> whole = Logits(*model, ids, Feed::kWhole);
      EXPECT_EQ(Logits(*model, ids, Feed::kOneByOne), whole) << text;
      omp_set_num_threads(2);
      EXPECT_EQ(Logits(*model, ids, Feed::kBatched), whole) << text;
      EXPECT_EQ(Logits(*model, ids, Feed::kOneByOne), whole) << text;
    }
  omp_set_num_threads(saved);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WeightFormatsTest,
                         ::testing::Values("newarch_gqa_f32", "newarch_gqa_bias_bf16",
                                           "newarch_1ln_f16", "mq_f32", "mq_bias_bf16",
                                           "mha_seq_bf16"));

// With bf16 activations a bfp matrix is the BF16 matrix of its decoded values, bit for bit.
TEST(WeightFormats, BfpIsTheBf16CheckpointOfItsDecodedValues) {
  for (const char* fixture : {"newarch_gqa_bias_bf16", "mq_bias_bf16", "mha_seq_bf16"}) {
    const std::string dir = test::FixtureDir(fixture);
    const std::vector<int> ids = test::ReadFixtureIds(dir);
    for (const char* text : {"bfp8", "bfp4", "attn=bfp4,mlp=bfp8"}) {
      test::TempDir ref_dir;
      WriteReference(dir, ref_dir.path(), WeightSpec::Parse(text), DType::kBF16);
      const auto ref =
          DecoderModel::Load(ref_dir.path(), Options("auto", ActivationPrecision::kBF16));
      const auto model = DecoderModel::Load(dir, Options(text, ActivationPrecision::kBF16));
      EXPECT_EQ(Logits(*model, ids, Feed::kWhole), Logits(*ref, ids, Feed::kWhole))
          << fixture << " --weights " << text;
    }
  }
}

TEST(WeightFormats, ATiedLmHeadConvertedKeepsTheEmbeddings) {
  const std::string dir = test::FixtureDir("newarch_gqa_f32");  // tied
  const auto model = DecoderModel::Load(dir, Options("lm_head=bfp4", ActivationPrecision::kF32));
  const ModelWeights& w = model->weights();
  ASSERT_TRUE(w.lm_head_tied);
  EXPECT_EQ(w.lm_head_p.format(), WeightFormat::kBfp4);
  std::vector<float> got(static_cast<size_t>(w.embeddings.cols)), want(got.size());
  for (int64_t token : {0, 7, 100}) {
    w.Embedding(token, got.data());
    GatherRow(w.embeddings, token, want.data());
    EXPECT_EQ(got, want) << token;
  }
  EXPECT_EQ(w.layers[0].qkv.p.format(), WeightFormat::kF32);  // attn not named: auto
  EXPECT_EQ(static_cast<int64_t>(w.lm_head_p.bytes()),
            WeightFormatBytes(WeightFormat::kBfp4, w.lm_head_p.rows(), w.lm_head_p.cols()));
}

TEST(WeightSpec, ParsesAndPrintsCanonically) {
  const std::pair<const char*, const char*> cases[] = {
      {"auto", "auto"},
      {"bfp8", "bfp8"},
      {"f32", "f32"},
      {"mlp=bfp4", "mlp=bfp4"},
      {"lm_head=bf16,attn=bfp8", "attn=bfp8,lm_head=bf16"},
      {"attn=bfp4,mlp=bfp4,lm_head=bfp4", "bfp4"},
      {"attn=auto,mlp=bfp8", "mlp=bfp8"},
      {"attn=auto", "auto"},
  };
  for (const auto& [in, out] : cases) {
    const WeightSpec s = WeightSpec::Parse(in);
    EXPECT_EQ(s.ToString(), out) << in;
    EXPECT_EQ(WeightSpec::Parse(s.ToString()), s) << in;
  }
  const WeightSpec mixed = WeightSpec::Parse("attn=bfp8,lm_head=bf16");
  EXPECT_EQ(mixed.Resolve(WeightGroup::kAttn, DType::kF32), WeightFormat::kBfp8);
  EXPECT_EQ(mixed.Resolve(WeightGroup::kMlp, DType::kF16), WeightFormat::kF16);
  EXPECT_EQ(mixed.Resolve(WeightGroup::kLmHead, DType::kF32), WeightFormat::kBF16);
  EXPECT_TRUE(mixed.any_bfp());
  EXPECT_FALSE(WeightSpec::Parse("bf16").any_bfp());
  EXPECT_TRUE(WeightSpec::Parse("auto").is_auto());
}

TEST(WeightSpec, BadSpecsAreOneLineNamingWeights) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "--weights is empty"},
      {"fp8", "unknown format 'fp8'"},
      {"f16", "unknown format 'f16'"},
      {"BFP8", "unknown format 'BFP8'"},
      {"mlp=int4", "unknown format 'int4'"},
      {"ffn=bfp8", "unknown group 'ffn'"},
      {"attn=bfp8,attn=bf16", "group 'attn' is named twice"},
      {"attn=bfp8,", "empty part"},
      {",attn=bfp8", "empty part"},
      {"attn=", "group 'attn' has no format"},
      {"bfp8,mlp=bfp4", "'bfp8' is not GROUP=FORMAT"},
  };
  for (const auto& [in, needle] : cases) {
    try {
      WeightSpec::Parse(in);
      ADD_FAILURE() << "no error for '" << in << "'";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("--weights", 0), 0u) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

// A bfp model holds its matrices' tiles at tt-metal's size, so HeldBytes shrinks with the format
// (what the process holds and decode streams).
TEST(WeightFormats, BfpModelsHoldTheirTiles) {
  const std::string dir = test::FixtureDir("newarch_gqa_bias_bf16");  // hidden 128, ffn 256
  std::map<std::string, int64_t> held;
  std::map<std::string, int64_t> matrices;  // the packed matrices' bytes
  for (const char* text : {"bf16", "bfp8", "bfp4"}) {
    const auto model = DecoderModel::Load(dir, Options(text, ActivationPrecision::kBF16));
    const ModelWeights& w = model->weights();
    const std::optional<WeightFormat> f = WeightSpec::Parse(text).Of(WeightGroup::kMlp);
    std::vector<const PackedMatrix*> all = {&w.lm_head_p};
    for (const LayerWeights& l : w.layers)
      for (const Linear* m : l.Linears()) all.push_back(&m->p);
    for (const PackedMatrix* m : all) {
      if (IsBfp(*f)) {
        EXPECT_EQ(static_cast<int64_t>(m->bytes()),
                  (BfpLayout{BfpOf(*f), m->rows(), m->cols()}.bytes()))
            << text;
      }
      matrices[text] += static_cast<int64_t>(m->bytes());
    }
    held[text] = w.HeldBytes();
  }
  // The vectors (biases, LayerNorms) are the same in each; the matrices shrink 2 : 1.0625 : 0.5625.
  EXPECT_EQ(held["bf16"] - matrices["bf16"], held["bfp8"] - matrices["bfp8"]);
  EXPECT_EQ(held["bf16"] - matrices["bf16"], held["bfp4"] - matrices["bfp4"]);
  EXPECT_LT(held["bfp8"], held["bf16"]);
  EXPECT_LT(held["bfp4"], held["bfp8"]);
}

// Packing reports its progress (the load's progress line on a terminal): source bytes, rising, in
// several steps, to the total of every packed matrix's rows; the model keeps no callback.
TEST(WeightFormats, PackingReportsItsProgress) {
  const std::string dir = test::FixtureDir("newarch_gqa_bias_bf16");
  for (const char* text : {"auto", "bfp8"}) {
    std::vector<std::pair<int64_t, int64_t>> calls;  // (done, total)
    ModelOptions o = Options(text, ActivationPrecision::kBF16);
    o.pack_progress = [&calls](int64_t done, int64_t total) { calls.emplace_back(done, total); };
    const auto model = DecoderModel::Load(dir, o);
    EXPECT_FALSE(model->options().pack_progress) << text;
    const ModelWeights& w = model->weights();
    int64_t total = w.lm_head.rows * w.lm_head.cols * 2;  // BF16 sources
    for (const LayerWeights& l : w.layers)
      for (const Linear* m : l.Linears()) total += m->w.rows * m->w.cols * 2;
    ASSERT_GE(calls.size(), 4 * w.layers.size() + 1) << text;  // a call a matrix at least
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].second, total) << text;
      if (i > 0) {
        EXPECT_GT(calls[i].first, calls[i - 1].first) << text << " " << i;
      }
    }
    EXPECT_EQ(calls.back().first, total) << text;
  }
}

}  // namespace
}  // namespace wc
