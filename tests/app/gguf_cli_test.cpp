// GGUF files through the real binary, as a user gives one to --model: the same tokens as the
// checkpoint directory it was converted from, `info` naming the architecture, the bits of each
// --weights format, and one line for what a GGUF model cannot do yet (its own tokenizer).
#include <gtest/gtest.h>
#include <algorithm>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace wc {
namespace {

using test::RunWormchat;

std::string Gguf(const std::string& name) {
  return test::FixtureDir("gguf") + "/" + name + ".gguf";
}

TEST(GgufCli, GenerateGivesTheTokensOfTheCheckpointItCameFrom) {
  for (const char* name : {"mq_f32", "newarch_gqa_f32", "llama_gqa4_f32", "llama_mqa_linear_f16"})
    for (const char* weights : {"auto", "bf16", "bfp8"}) {
      const std::vector<std::string> flags = {"--ids",     "5 17 42 9", "-n",        "12",
                                              "--weights", weights,     "--threads", "2"};
      std::vector<std::string> a = {"generate", "--model", test::FixtureDir(name)};
      std::vector<std::string> b = {"generate", "--model", Gguf(name)};
      a.insert(a.end(), flags.begin(), flags.end());
      b.insert(b.end(), flags.begin(), flags.end());
      const auto from_dir = RunWormchat(a), from_gguf = RunWormchat(b);
      ASSERT_EQ(from_dir.exit_code, 0) << test::Describe(from_dir);
      ASSERT_EQ(from_gguf.exit_code, 0) << test::Describe(from_gguf);
      EXPECT_EQ(from_gguf.out, from_dir.out) << name << " --weights " << weights;
      EXPECT_EQ(test::CountLines(from_gguf.out), 1) << from_gguf.out;
    }
}

TEST(GgufCli, ADirectoryHoldingOneGgufFileIsThatFile) {
  test::TempDir dir;
  test::WriteFile(dir.File("falcon.gguf"), test::ReadFile(Gguf("mq_f32")));
  const auto from_dir = RunWormchat({"generate", "--model", dir.path(), "--ids", "3 4", "-n", "6"});
  const auto from_file =
      RunWormchat({"generate", "--model", Gguf("mq_f32"), "--ids", "3 4", "-n", "6"});
  ASSERT_EQ(from_dir.exit_code, 0) << test::Describe(from_dir);
  EXPECT_EQ(from_dir.out, from_file.out);
  test::WriteFile(dir.File("another.gguf"), test::ReadFile(Gguf("mq_f32")));
  const auto two = RunWormchat({"info", "--model", dir.path()});
  EXPECT_NE(two.exit_code, 0);
  EXPECT_EQ(two.err,
            "wormchat: error: --model: " + dir.path() +
                ": holds 2 GGUF files (another.gguf, falcon.gguf) and no config.json; give "
                "--model the one to run (see wormchat info --help)\n");
}

TEST(GgufCli, InfoNamesTheArchitectureAndLayout) {
  const auto r = RunWormchat({"info", "--model", Gguf("newarch_gqa_f32")});
  ASSERT_EQ(r.exit_code, 0) << test::Describe(r);
  EXPECT_NE(r.out.find("architecture falcon"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 layers, hidden 128, 8 query heads / 2 KV heads"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("F32"), std::string::npos) << r.out;
}

TEST(GgufCli, TextItsVocabularyCannotSpellIsOneLine) {
  // mq_f32.gguf's vocabulary is a toy's without the byte tokens SPM falls back to.
  const auto r = RunWormchat({"generate", "--model", Gguf("mq_f32"), "--prompt", "hello"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.rfind("wormchat: error: " + Gguf("mq_f32") + ": ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // A file that is not GGUF is named as neither a directory nor a GGUF file.
  const auto other = RunWormchat(
      {"generate", "--model", test::FixtureDir("mq_f32") + "/config.json", "--ids", "1"});
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.err.find("config.json: not a model directory or a GGUF file"), std::string::npos)
      << other.err;
}

}  // namespace
}  // namespace wc

namespace wc {
namespace {

// Quantized GGUF files (issue 52) and ollama's store through the binary.
TEST(GgufCli, AQuantizedFileRunsTheSameTokensOnAnyThreadCount) {
  const std::string q = Gguf("tiny_llama_q4_k_m");
  const auto r = RunWormchat({"generate", "--model", q, "--ids", "1 2", "-n", "6"});
  ASSERT_EQ(r.exit_code, 0) << test::Describe(r);
  EXPECT_FALSE(r.out.empty());
  const auto one =
      RunWormchat({"generate", "--model", q, "--ids", "1 2", "-n", "6", "--threads", "1"});
  EXPECT_EQ(one.out, r.out);
  // And on any SIMD target: the prompt's tokens run the VNNI kernel where the CPU has it, AVX2's
  // under WORMCHAT_SIMD=avx2 (and a batch of rows decoding together, the same).
  setenv("WORMCHAT_SIMD", "avx2", 1);
  const auto avx2 = RunWormchat({"generate", "--model", q, "--ids", "1 2", "-n", "6"});
  unsetenv("WORMCHAT_SIMD");
  EXPECT_EQ(avx2.out, r.out);
}

TEST(GgufCli, InfoOfAQuantizedFileCountsEachType) {
  const std::string q = Gguf("tiny_llama_q4_k_m");
  const auto r = RunWormchat({"info", q});
  ASSERT_EQ(r.exit_code, 0) << test::Describe(r);
  EXPECT_NE(r.out.find("architecture llama"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gguf         v3, llama, context length 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  Q4_K            5        "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  F32             3         3072 "), std::string::npos) << r.out;
  const auto same = RunWormchat({"info", "--model", q});
  EXPECT_EQ(same.out, r.out);
  const auto j = RunWormchat({"info", q, "--json"});
  ASSERT_EQ(j.exit_code, 0) << test::Describe(j);
  const auto json = nlohmann::json::parse(j.out);
  EXPECT_EQ(json["gguf"]["tensor_types"]["Q4_K"]["tensors"], 5);
  EXPECT_EQ(json["gguf"]["tensor_types"]["Q6_K"]["tensors"], 2);
  EXPECT_EQ(json["gguf"]["tensor_types"]["Q5_0"]["tensors"], 1);
  EXPECT_EQ(json["gguf"]["tensor_types"]["Q8_0"]["bytes"], 256 / 32 * 34 * 32);
  EXPECT_EQ(json["gguf"]["context_length"], 64);
  EXPECT_EQ(json["weight_formats"]["mlp"], "Q4_K");  // its first matrix's type, held as stored
}

TEST(GgufCli, ConvertRoundsAQuantizedFileTwiceOnlyWithAllowRequantize) {
  const std::string q = Gguf("tiny_llama_q4_k_m");
  test::TempDir dir;
  const auto refused = RunWormchat({"convert", q, "--weights", "bf16", "--out", dir.File("a")});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_EQ(test::CountLines(refused.err), 1) << refused.err;
  EXPECT_NE(refused.err.find("rounds it twice"), std::string::npos) << refused.err;
  const auto asked = RunWormchat(
      {"convert", q, "--weights", "bf16", "--out", dir.File("b"), "--allow-requantize"});
  ASSERT_EQ(asked.exit_code, 0) << test::Describe(asked);
  EXPECT_EQ(asked.err,
            "warning: quantized GGUF weights were rounded twice (dequantized exactly, then rounded "
            "to --weights bf16); --weights f32 keeps them exact\n");
  const auto exact = RunWormchat({"convert", q, "--weights", "f32", "--out", dir.File("c")});
  ASSERT_EQ(exact.exit_code, 0) << test::Describe(exact);
  EXPECT_NE(exact.out.find("note: the GGUF file's tokenizer"), std::string::npos) << exact.out;
  const auto run = RunWormchat({"generate", "--model", dir.File("c"), "--ids", "1 2 3", "-n", "4"});
  ASSERT_EQ(run.exit_code, 0) << test::Describe(run);
}

// A fake ollama store holding an F32 fixture as its model blob.
class OllamaStoreCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string hex(64, 'c');
    const std::string m = root_.File("manifests/registry.ollama.ai/library/falcon/");
    std::filesystem::create_directories(m);
    std::filesystem::create_directories(root_.File("blobs"));
    test::WriteFile(m + "7b", R"({"layers":[{"mediaType":"application/vnd.ollama.image.model",)"
                              R"("digest":"sha256:)" +
                                  hex + R"(","size":1}]})");
    blob_ = root_.File("blobs/sha256-" + hex);
    test::WriteFile(blob_, test::ReadFile(Gguf("mq_f32")));
    setenv("OLLAMA_MODELS", root_.path().c_str(), 1);
  }
  void TearDown() override { unsetenv("OLLAMA_MODELS"); }
  test::TempDir root_;
  std::string blob_;
};

TEST_F(OllamaStoreCli, RunsWhatOllamaPulledInPlace) {
  const auto info = RunWormchat({"info", "ollama:falcon:7b"});
  ASSERT_EQ(info.exit_code, 0) << test::Describe(info);
  EXPECT_NE(info.out.find("model        " + blob_), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("architecture falcon"), std::string::npos) << info.out;
  const auto a =
      RunWormchat({"generate", "--model", "ollama:falcon:7b", "--ids", "5 17 42", "-n", "6"});
  const auto b = RunWormchat(
      {"generate", "--model", test::FixtureDir("mq_f32"), "--ids", "5 17 42", "-n", "6"});
  ASSERT_EQ(a.exit_code, 0) << test::Describe(a);
  EXPECT_EQ(a.out, b.out);
}

TEST_F(OllamaStoreCli, AMissingNameListsTheStoreAndAMissingBlobIsNamed) {
  const auto r = RunWormchat({"info", "--model", "ollama:falcon3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err,
            "wormchat: error: --model: ollama:falcon3: falcon3:latest is not in the ollama "
            "store " +
                root_.path() + "; it holds falcon:7b (see wormchat info --help)\n");
  std::filesystem::remove(blob_);
  const auto gone = RunWormchat({"generate", "--model", "ollama:falcon:7b", "--ids", "1"});
  EXPECT_NE(gone.exit_code, 0);
  EXPECT_EQ(test::CountLines(gone.err), 1) << gone.err;
  EXPECT_NE(gone.err.find(blob_ + ": missing"), std::string::npos) << gone.err;
}

TEST(GgufCli, BenchModelNamesTheFormatsItRuns) {
  test::TempDir dir;
  const auto r = RunWormchat({"bench", "model", "--model", Gguf("mq_q4_0"), "--prompt-len", "8",
                              "--gen-len", "24", "--decode-rows", "1", "--repeats", "1",
                              "--threads", "1", "--json", dir.File("b.json")});
  ASSERT_EQ(r.exit_code, 0) << test::Describe(r);
  const nlohmann::json j = nlohmann::json::parse(test::ReadFile(dir.File("b.json")));
  // Every matrix of this file, the tied LM head too, is Q4_0 (its norms are F32 vectors): the
  // header names what the packed matrices run in, not the bf16 its KV cache defaults to.
  EXPECT_EQ(j.at("weights_formats"), "Q4_0");
  EXPECT_NE(r.out.find("vocab 347, Q4_0 weights, --weights auto"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace wc
