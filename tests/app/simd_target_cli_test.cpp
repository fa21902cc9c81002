// Issue 54's contract through the real binary: within a --matmul-precision value, no bit depends on
// the SIMD target. `logits` files (every position's logits, f32) written natively and under
// WORMCHAT_SIMD=avx2 (Highway's AVX2 target and none of the hand-written AVX-512 kernels) are the
// same bytes, for every precision, the portable KV formats, both attention engines and the three
// layouts, and GGUF files. fp8 and bfp8 K/V are the exception the docs name (vdpbf16ps on AVX-512
// BF16). On a CPU without AVX-512 both runs take the same kernels and the test says it checked
// nothing new.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "tests/test_util.h"

namespace wc {
namespace {

using test::RunWormchat;

const std::string kSpTokenizer = test::FixtureDir("tokenizer") + "/tokenizer.model";

// The logits of `prompt` on `model` with `flags`, natively and under WORMCHAT_SIMD=avx2.
void ExpectTheSameLogitsOnAvx2(const std::string& model, const std::vector<std::string>& flags) {
  test::TempDir dir;
  std::string prompt;
  for (int i = 0; i < 6; ++i) prompt += "The falcon flies over the harbor at dawn, and at dusk. ";
  const bool gguf = model.size() > 5 && model.substr(model.size() - 5) == ".gguf";
  auto run = [&](const std::string& out) {
    std::vector<std::string> args = {"logits", "--out", out};
    if (gguf)  // the fixtures' vocabularies are small: ids, not text
      args.insert(args.end(), {"--ids", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 1 2 3 4 5 6 7"});
    else
      args.insert(args.end(), {"--raw", "--prompt", prompt});
    if (!model.empty()) args.insert(args.end(), {"--model", model});
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = RunWormchat(args);
    EXPECT_EQ(r.exit_code, 0) << test::Describe(r);
    return test::ReadFile(out);
  };
  const std::string native = run(dir.File("native.npy"));
  setenv("WORMCHAT_SIMD", "avx2", 1);
  const std::string avx2 = run(dir.File("avx2.npy"));
  unsetenv("WORMCHAT_SIMD");
  std::string what = model.empty() ? "the default model" : model;
  for (const auto& f : flags) what += " " + f;
  ASSERT_GT(native.size(), 128u) << what;
  EXPECT_TRUE(native == avx2) << what << ": the logits differ under WORMCHAT_SIMD=avx2";
}

class SimdTargetCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if ((hwy::SupportedTargets() & HWY_AVX3) == 0)
      GTEST_SKIP() << "no AVX-512 here: WORMCHAT_SIMD=avx2 runs the native kernels";
  }
};

TEST_F(SimdTargetCliTest, EveryPrecisionGivesTheSameLogitsOnAvx2) {
  const std::vector<std::vector<std::string>> modes = {
      {},                     // f32 weights, f32 K/V
      {"--weights", "bf16"},  // bf16 activations, bf16 K/V
      {"--weights", "bf16", "--matmul-precision", "f32"},
      {"--weights", "bf16", "--matmul-precision", "int16"},
      {"--weights", "bfp8", "--matmul-precision", "int8"},
      {"--weights", "bfp4", "--matmul-precision", "int8"},
      {"--weights", "bfp4"},
  };
  for (const auto& mode : modes) ExpectTheSameLogitsOnAvx2("", mode);
}

TEST_F(SimdTargetCliTest, EveryPortableKvFormatAndEngineGivesTheSameLogitsOnAvx2) {
  const std::vector<std::vector<std::string>> modes = {
      {"--kv-dtype", "bf16"},
      {"--kv-dtype", "int8"},
      {"--kv-dtype", "bf16", "--kv-block-size", "16", "--mesh", "t3k"},
      {"--attention", "reference"},
      {"--attention", "reference", "--kv-dtype", "bf16"},
  };
  for (const auto& mode : modes) ExpectTheSameLogitsOnAvx2("", mode);
}

// Falcon3 (the Llama layout: RMSNorm, SwiGLU, GQA) and Falcon-RW (ALiBi, head_dim 32).
TEST_F(SimdTargetCliTest, EveryLayoutGivesTheSameLogitsOnAvx2) {
  const std::vector<std::vector<std::string>> layouts = {
      {"--preset", "falcon3-1b", "--layers", "2", "--hidden", "128", "--heads", "4", "--kv-heads",
       "1", "--vocab", "700", "--ctx", "256", "--seed", "21"},
      {"--preset", "falcon-rw-1b", "--layers", "2", "--hidden", "192", "--heads", "6", "--vocab",
       "700", "--ctx", "256", "--seed", "22"},
  };
  for (const auto& flags : layouts) {
    test::TempDir dir;
    std::vector<std::string> args = {"init", "--tokenizer", kSpTokenizer, "--out", dir.path()};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = RunWormchat(args);
    ASSERT_EQ(r.exit_code, 0) << test::Describe(r);
    ExpectTheSameLogitsOnAvx2(dir.path(), {});
    ExpectTheSameLogitsOnAvx2(dir.path(), {"--weights", "bf16", "--matmul-precision", "int16"});
    ExpectTheSameLogitsOnAvx2(dir.path(), {"--weights", "bfp4", "--matmul-precision", "int8"});
  }
}

// GGUF files: the quantized GEMM's kernels (VNNI natively, AVX2's under the limit) and f32 ones.
TEST_F(SimdTargetCliTest, GgufFilesGiveTheSameLogitsOnAvx2) {
  for (const char* name : {"tiny_llama_q4_k_m", "mq_q4_0", "mq_q8_0", "llama_gqa4_f32"})
    ExpectTheSameLogitsOnAvx2(test::FixtureDir("gguf") + "/" + name + ".gguf", {});
}

}  // namespace
}  // namespace wc
