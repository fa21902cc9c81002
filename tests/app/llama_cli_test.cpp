// The Llama layout (TII's Falcon3) through the real binary: `init --preset falcon3-1b` writes a
// checkpoint in Hugging Face's names, `info` names the architecture, `logits` matches the numpy
// reference, and generation is the same bits on any thread count, KV format and weight format
// path that the Falcon layouts take.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "util/npy.h"

namespace wc {
namespace {

using test::RunWormchat;

const std::string kTokenizer = test::FixtureDir("tokenizer") + "/tokenizer.model";

class LlamaCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    const auto r = RunWormchat(
        {"init",    "--preset", "falcon3-1b", "--layers",    "2",        "--hidden", "256",
         "--heads", "4",        "--kv-heads", "2",           "--vocab",  "700",      "--ctx",
         "128",     "--seed",   "7",          "--tokenizer", kTokenizer, "--out",    dir_->path()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string Model() { return dir_->path(); }
  static test::TempDir* dir_;
};
test::TempDir* LlamaCliTest::dir_ = nullptr;

TEST_F(LlamaCliTest, InitWritesHuggingFacesLlamaLayout) {
  const auto cfg = nlohmann::json::parse(test::ReadFile(Model() + "/config.json"));
  EXPECT_EQ(cfg["model_type"], "llama");
  EXPECT_EQ(cfg["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(cfg["head_dim"], 256);
  EXPECT_EQ(cfg["num_key_value_heads"], 2);
  EXPECT_EQ(cfg["intermediate_size"], 1024);  // Falcon3-1B's 4x hidden, kept
  EXPECT_EQ(cfg["rope_theta"], 1000042.0);
  const std::string st = test::ReadFile(Model() + "/model.safetensors");
  for (const char* name :
       {"model.embed_tokens.weight", "model.layers.1.self_attn.k_proj.weight",
        "model.layers.0.mlp.gate_proj.weight", "model.norm.weight", "lm_head.weight"})
    EXPECT_NE(st.find(name), std::string::npos) << name;
  EXPECT_EQ(st.find("transformer."), std::string::npos);
}

TEST_F(LlamaCliTest, InfoNamesTheArchitecture) {
  const auto r = RunWormchat({"info", "--model", Model()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("architecture llama (LlamaForCausalLM)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("grouped KV heads, 2 query heads each, RMSNorm, SwiGLU"), std::string::npos)
      << r.out;
  const auto j = RunWormchat({"info", "--preset", "falcon3-7b", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto info = nlohmann::json::parse(j.out);
  EXPECT_EQ(info["architecture"], "llama");
  EXPECT_EQ(info["parameters"], 7455550464);
  EXPECT_EQ(info["head_dim"], 256);
}

TEST_F(LlamaCliTest, GenerationIsTheSameBitsOnAnyThreadCountAndKvPath) {
  auto gen = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"generate",   "--model", Model(), "--prompt",
                                     "The harbor", "-n",      "16",    "--temperature",
                                     "0",          "--raw"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = RunWormchat(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string a = gen({"--threads", "1"});
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, gen({"--threads", "2"}));
  EXPECT_EQ(a, gen({"--threads", "2", "--kv-block-size", "0"}));  // contiguous
  EXPECT_EQ(a, gen({"--threads", "2", "--kv-block-size", "16", "--prefix-cache", "off"}));
  EXPECT_FALSE(gen({"--weights", "bfp8", "--kv-dtype", "int8"}).empty());
}

// The prefix cache on disk names the architecture in every block's key, and a second run reads
// the blocks back to the same tokens.
TEST_F(LlamaCliTest, PrefixCacheFilesNameTheArchitecture) {
  test::TempDir cache;
  auto gen = [&] {
    const auto r = RunWormchat({"generate", "--model", Model(), "--prompt", std::string(100, 'a'),
                                "-n", "8", "--temperature", "0", "--raw", "--kv-block-size", "16",
                                "--prefix-cache-dir", cache.path()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string first = gen();
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(cache.path())) {
    ++files;
    const std::string bytes = test::ReadFile(e.path().string());
    EXPECT_NE(bytes.find("\narchitecture llama\n"), std::string::npos) << e.path();
  }
  EXPECT_GT(files, 0);
  EXPECT_EQ(gen(), first);
}

TEST(LlamaCli, LogitsMatchTheNumpyReference) {
  for (const char* name : {"llama_gqa4_f32", "llama_mqa_linear_f16"}) {
    test::TempDir out;
    const std::string dir = test::FixtureDir(name);
    const auto r =
        RunWormchat({"logits", "--model", dir, "--ids", test::ReadFile(dir + "/ids.txt"),
                     "--kv-dtype", "f32", "--matmul-precision", "f32", "--out", out.File("l.npy")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const NpyArray got = ReadNpyF32(out.File("l.npy")), ref = ReadNpyF32(dir + "/logits.npy");
    ASSERT_EQ(got.shape, ref.shape);
    EXPECT_LE(test::RelMaxError(got.data, ref.data), 1e-4) << name;
  }
}

// Greedy text over up to 64 tokens (53 where the fixture's context of 64 ends first) is the numpy
// reference's (tools/python/greedy_ref.py wrote greedy.txt; its smallest top-1/top-2 gap is
// 7.4e-4) for every fixture - Falcon's layouts, the Llama layout's, Falcon-RW's - with f32
// activations and KV as the reference computes, with and without speculation.
TEST(LlamaCli, GreedyTokensAreTheReferencesOnEveryFixture) {
  for (const char* name :
       {"mha_bias_f32", "mha_seq_bf16", "mq_bias_bf16", "mq_f32", "newarch_1ln_f16",
        "newarch_gqa_bias_bf16", "newarch_gqa_f32", "llama_gqa4_f32", "llama_gqa2_tied_bias_bf16",
        "llama_mqa_linear_f16", "rw_alibi_f32", "rw_alibi6_bf16", "rw_alibi12_long_f32"}) {
    const std::string dir = test::FixtureDir(name);
    std::string prompt = test::ReadFile(dir + "/ids.txt");
    while (!prompt.empty() && prompt.back() == '\n') prompt.pop_back();
    std::string want = test::ReadFile(dir + "/greedy.txt");
    while (!want.empty() && want.back() == '\n') want.pop_back();
    for (const char* speculate : {"off", "lookup"}) {
      const auto r = RunWormchat({"generate", "--model", dir, "--ids", prompt, "-n", "64",
                                  "--temperature", "0", "--kv-dtype", "f32", "--matmul-precision",
                                  "f32", "--speculate", speculate, "--json"});
      ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
      const nlohmann::json out = nlohmann::json::parse(r.out);
      std::string got;
      for (const auto& id : out["sequences"][0]["ids"])
        got += (got.empty() ? "" : " ") + std::to_string(id.get<int>());
      EXPECT_EQ(got, want) << name << " --speculate " << speculate;
    }
  }
}

TEST(LlamaCli, AConvertedCheckpointGivesTheLogitsOfItsWeightsFlag) {
  // Block floats stored by `convert` (Hugging Face's q/k/v/o and gate/up/down names) load as the
  // same numbers `--weights` makes at load: the same logits bit for bit.
  test::TempDir out;
  const std::string dir = test::FixtureDir("llama_gqa4_f32");
  const std::string spec = "attn=bfp8,mlp=bfp4,lm_head=bfp8";
  auto r = RunWormchat({"convert", "--weights", spec, "--out", out.File("c"), dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string ids = test::ReadFile(dir + "/ids.txt");
  r = RunWormchat({"logits", "--model", out.File("c"), "--ids", ids, "--out", out.File("a.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunWormchat(
      {"logits", "--model", dir, "--weights", spec, "--ids", ids, "--out", out.File("b.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadNpyF32(out.File("a.npy")).data, ReadNpyF32(out.File("b.npy")).data);
  const std::string st = test::ReadFile(out.File("c") + "/model.safetensors");
  EXPECT_NE(st.find("model.layers.1.mlp.down_proj.weight.format"), std::string::npos);
}

TEST(LlamaCli, AContradictoryConfigIsOneLineNamingTheKey) {
  test::TempDir dir;
  test::CopyDir(test::FixtureDir("llama_gqa4_f32"), dir.path());
  auto cfg = nlohmann::json::parse(test::ReadFile(dir.File("config.json")));
  cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  test::WriteFile(dir.File("config.json"), cfg.dump());
  const auto r =
      RunWormchat({"logits", "--model", dir.path(), "--ids", "1 2", "--out", dir.File("l.npy")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(test::CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("rope_scaling.rope_type \"yarn\" is not supported"), std::string::npos)
      << r.err;
  cfg.erase("rope_scaling");
  cfg["head_dim"] = 16;  // the projections hold 32-wide heads
  test::WriteFile(dir.File("config.json"), cfg.dump());
  const auto r2 =
      RunWormchat({"logits", "--model", dir.path(), "--ids", "1 2", "--out", dir.File("l.npy")});
  EXPECT_NE(r2.exit_code, 0);
  EXPECT_EQ(test::CountLines(r2.err), 1) << r2.err;
  EXPECT_NE(r2.err.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << r2.err;
}

}  // namespace
}  // namespace wc
