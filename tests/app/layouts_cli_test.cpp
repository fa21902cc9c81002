// Issue 51's "everything works on every layout", through the real binary, on small random
// checkpoints of the Llama layout (Falcon3: GQA, SwiGLU, RMSNorm) and of Falcon-RW (ALiBi with a
// head count that is not a power of two, sequential residuals, biases): perplexity, calibrate and
// calibrated KV scales, beams, every KV format paged and contiguous, --weights and convert, a
// draft model proposing for a target of its family, the SIMD target, and the mesh estimate's
// label. The serving loop's own determinism on these layouts is tests/serving/
// serving_loop_layouts_test.cpp; logits against the references are llama_cli_test.cpp and
// model_test.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace wc {
namespace {

using test::RunWormchat;

const std::string kSpTokenizer = test::FixtureDir("tokenizer") + "/tokenizer.model";

struct Layout {
  const char* name;
  std::vector<std::string> init;  // init flags beside --out, --tokenizer
};

const Layout kLayouts[] = {
    {"falcon3",
     {"--preset", "falcon3-1b", "--layers", "2", "--hidden", "128", "--heads", "4", "--kv-heads",
      "1", "--vocab", "700", "--ctx", "256", "--seed", "21"}},
    {"falcon-rw",
     {"--preset", "falcon-rw-1b", "--layers", "2", "--hidden", "192", "--heads", "6", "--vocab",
      "700", "--ctx", "256", "--seed", "22"}},
};

// gtest names a case by its layout, not its bytes.
void PrintTo(const Layout& layout, std::ostream* os) {
  *os << layout.name;
}

std::string Init(const test::TempDir& dir, const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"init", "--tokenizer", kSpTokenizer, "--out", dir.path()};
  args.insert(args.end(), flags.begin(), flags.end());
  const auto r = RunWormchat(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir.path();
}

class LayoutsCliTest : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    model_ = Init(dir_, GetParam().init);
    std::string text;
    for (int i = 0; i < 12; ++i)
      text += "The falcon flies over the harbor at dawn, and again at dusk. ";
    test::WriteFile(dir_.File("text.txt"), text);
  }
  test::RunResult Run(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--model", model_});
    return RunWormchat(args);
  }
  std::string Gen(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "generate", "--prompt", "The harbor at dawn", "-n", "12", "--temperature", "0", "--raw"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
    return r.out;
  }
  test::TempDir dir_;
  std::string model_;
};

TEST_P(LayoutsCliTest, PerplexityIsTheSameBitsOnAnyThreadCountAndKvLayout) {
  auto ppl = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"perplexity", "--text", dir_.File("text.txt"), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string one = ppl({"--threads", "1"});
  EXPECT_NE(one.find("perplexity"), std::string::npos) << one;
  EXPECT_EQ(ppl({"--threads", "2"}), one);
  EXPECT_EQ(ppl({"--threads", "2", "--kv-block-size", "16"}), one);
  EXPECT_NE(ppl({"--kv-dtype", "int8"}), one);  // another KV format: other numbers
}

TEST_P(LayoutsCliTest, CalibratedScalesServeTensorScaledKv) {
  const auto cal = Run({"calibrate", "--text", dir_.File("text.txt")});
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  EXPECT_NE(test::ReadFile(model_ + "/kv_scales.json").find("k_amax"), std::string::npos);
  for (const char* kv : {"int8", "fp8-e4m3"}) {
    const std::string a = Gen({"--kv-dtype", kv, "--kv-scale", "tensor", "--threads", "1"});
    EXPECT_EQ(
        Gen({"--kv-dtype", kv, "--kv-scale", "tensor", "--threads", "2", "--kv-block-size", "16"}),
        a)
        << kv;
  }
}

TEST_P(LayoutsCliTest, EveryKvFormatPagedOrContiguousIsTheSameBits) {
  for (const char* kv : {"f32", "bf16", "int8", "fp8-e4m3", "fp8-e5m2", "bfp8"}) {
    const std::string contiguous = Gen({"--kv-dtype", kv, "--kv-block-size", "0"});
    EXPECT_EQ(Gen({"--kv-dtype", kv, "--kv-block-size", "16", "--threads", "1"}), contiguous) << kv;
  }
}

TEST_P(LayoutsCliTest, BeamsAreTheSameBitsOnAnyThreadCount) {
  const std::string a = Gen({"--beams", "3", "--num-return", "2", "--threads", "1"});
  EXPECT_EQ(Gen({"--beams", "3", "--num-return", "2", "--threads", "2", "--kv-block-size", "0"}),
            a);
}

TEST_P(LayoutsCliTest, ConvertedWeightsAreTheirFlagsWeights) {
  for (const char* w : {"bfp8", "bfp4", "attn=bfp8,mlp=bfp4,lm_head=bf16"}) {
    test::TempDir out;
    const auto c = RunWormchat({"convert", "--weights", w, "--out", out.path(), model_});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    const auto converted =
        RunWormchat({"generate", "--model", out.path(), "--prompt", "The harbor at dawn", "-n",
                     "12", "--temperature", "0", "--raw"});
    ASSERT_EQ(converted.exit_code, 0) << converted.err;
    EXPECT_EQ(converted.out, Gen({"--weights", w})) << w;
  }
}

// WORMCHAT_SIMD=avx2 runs the AVX2 kernels on an AVX-512 machine (the same ones elsewhere): the
// same tokens, as on every other layout.
// Block-float weights too: decode's one token runs the AVX2 one-token tile there, the AVX-512F
// one natively.
TEST_P(LayoutsCliTest, TheSimdTargetChangesNoToken) {
  const std::string native = Gen({"--kv-dtype", "bf16"});
  const std::string native_bfp4 = Gen({"--weights", "bfp4"});
  const std::string native_bfp8 = Gen({"--weights", "bfp8"});
  setenv("WORMCHAT_SIMD", "avx2", 1);
  const std::string avx2 = Gen({"--kv-dtype", "bf16"});
  const std::string avx2_beams = Gen({"--beams", "2"});
  const std::string avx2_bfp4 = Gen({"--weights", "bfp4"});
  const std::string avx2_bfp8 = Gen({"--weights", "bfp8"});
  unsetenv("WORMCHAT_SIMD");
  EXPECT_EQ(avx2, native);
  EXPECT_EQ(avx2_beams, Gen({"--beams", "2"}));
  EXPECT_EQ(avx2_bfp4, native_bfp4);
  EXPECT_EQ(avx2_bfp8, native_bfp8);
}

// tt-metal publishes no program of these models: the whole-step figure is labelled an estimate.
TEST_P(LayoutsCliTest, StatsLabelTheMeshFigureAnEstimate) {
  const auto r = Run({"generate", "--prompt", "The harbor", "-n", "4", "--stats", "--raw"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("an estimate for this layout ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no device figure to check it against"), std::string::npos) << r.err;
}

// A smaller checkpoint of the same family and tokenizer proposes; greedy tokens are the target's
// own (a Falcon3-1B drafting for a Falcon3-7B, in small).
TEST_P(LayoutsCliTest, ADraftOfTheSameFamilyProposesAndChangesNoToken) {
  test::TempDir draft_dir;
  std::vector<std::string> flags = GetParam().init;
  for (size_t i = 0; i + 1 < flags.size(); ++i) {
    if (flags[i] == "--layers") flags[i + 1] = "1";
    if (flags[i] == "--seed") flags[i + 1] = "99";
  }
  const std::string draft = Init(draft_dir, flags);
  const std::string plain = Gen({"--speculate", "off"});
  const auto r = Run({"generate", "--prompt", "The harbor at dawn", "-n", "12", "--temperature",
                      "0", "--raw", "--draft-model", draft, "--stats"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, plain);
  EXPECT_NE(r.err.find("draft"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Architectures, LayoutsCliTest, ::testing::ValuesIn(kLayouts),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace wc
