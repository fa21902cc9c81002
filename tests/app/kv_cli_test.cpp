// KV-cache formats end to end through the binary: perplexity per format, calibration and the
// tensor-scale mode, paged == contiguous generation, info per format, and refusals.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace wc {
namespace {

using test::RunWormchat;

struct Model {
  Model() {
    test::CopyDir(test::FixtureDir("mha_seq_bf16"), dir.path());  // head_dim 16, vocab 613
    test::CopyDir(test::FixtureDir("tokenizer"), dir.path());
    test::WriteFile(dir.File("text.txt"),
                    "a harbor is a sheltered port where ships can take on cargo. a falcon is a "
                    "bird of prey with long pointed wings.\n");
  }
  std::string path() const { return dir.path(); }
  std::string File(const std::string& n) const { return dir.File(n); }
  test::TempDir dir;
};

double Perplexity(const Model& m, std::vector<std::string> extra) {
  std::vector<std::string> args = {"perplexity", "--model",          m.path(),
                                   "--text",     m.File("text.txt"), "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = RunWormchat(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out)["perplexity"].get<double>();
}

TEST(KVCli, EveryFormatScoresCloseToBf16AndPagedMatchesContiguous) {
  Model m;
  const double bf16 = Perplexity(m, {});
  for (const char* d : {"int8", "fp8-e4m3", "fp8-e5m2", "bfp8", "f32"}) {
    const double p = Perplexity(m, {"--kv-dtype", d});
    EXPECT_NEAR(p / bf16, 1.0, 0.05) << d;
    EXPECT_EQ(p, Perplexity(m, {"--kv-dtype", d, "--kv-block-size", "16"})) << d;
  }
}

TEST(KVCli, CalibrateThenTensorScalesAndRefuseAForeignScaleFile) {
  Model m;
  auto r = RunWormchat({"perplexity", "--model", m.path(), "--text", m.File("text.txt"),
                        "--kv-dtype", "int8", "--kv-scale", "tensor"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("run `wormchat calibrate"), std::string::npos) << r.err;
  r = RunWormchat({"calibrate", "--model", m.path(), "--text", m.File("text.txt")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kv_scales.json"), std::string::npos);
  const double bf16 = Perplexity(m, {});
  for (const char* d : {"int8", "fp8-e4m3"}) {
    const double p = Perplexity(m, {"--kv-dtype", d, "--kv-scale", "tensor"});
    EXPECT_NEAR(p / bf16, 1.0, 0.1) << d;
  }
  // The same scale file beside another model is refused.
  Model other;
  test::CopyDir(test::FixtureDir("newarch_gqa_bias_bf16"), other.path());
  test::WriteFile(other.File("kv_scales.json"), test::ReadFile(m.File("kv_scales.json")));
  r = RunWormchat({"logits", "--model", other.path(), "--ids", "1 2", "--out", other.File("x.npy"),
                   "--kv-dtype", "int8", "--kv-scale", "tensor"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("kv_scales.json: was calibrated for another model"), std::string::npos)
      << r.err;
  r = RunWormchat({"perplexity", "--model", m.path(), "--text", m.File("text.txt"), "--kv-dtype",
                   "bfp8", "--kv-scale", "tensor"});
  EXPECT_NE(r.err.find("--kv-scale tensor applies to int8 and fp8"), std::string::npos) << r.err;
}

TEST(KVCli, PagedGenerationEqualsContiguous) {
  Model m;
  for (const char* d : {"bf16", "int8"}) {
    const auto a = RunWormchat({"generate", "--model", m.path(), "--prompt", "a harbor", "-n", "20",
                                "--seed", "3", "--kv-dtype", d});
    const auto b = RunWormchat({"generate", "--model", m.path(), "--prompt", "a harbor", "-n", "20",
                                "--seed", "3", "--kv-dtype", d, "--kv-block-size", "8"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out, b.out) << d;
  }
  const auto bad =
      RunWormchat({"generate", "--model", m.path(), "--prompt", "x", "--kv-block-size", "12"});
  EXPECT_NE(bad.err.find("--kv-block-size 12 must be a power of two"), std::string::npos)
      << bad.err;
}

TEST(KVCli, InfoReportsBytesPerFormat) {
  auto bytes = [](const char* d) {
    const auto r = RunWormchat({"info", "--preset", "falcon-40b", "--users", "32", "--ctx", "2048",
                                "--kv-dtype", d, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["kv_bytes_per_token"].get<double>();
  };
  const double bf16 = bytes("bf16");
  EXPECT_LE(bytes("int8") / bf16, 0.53);
  EXPECT_LE(bytes("fp8-e4m3") / bf16, 0.53);
  EXPECT_LE(bytes("bfp8") / bf16, 0.54);
}

// The reference attention (the oracle) reads every format and layout through the codec, and the
// FlashDecode engine reading the stored rows in place picks the same greedy tokens.
TEST(KVCli, ReferenceAttentionReadsEveryFormat) {
  Model m;
  for (const char* d : {"int8", "fp8-e4m3", "fp8-e5m2", "bfp8"}) {
    for (const char* block : {"0", "8"}) {
      std::vector<std::string> args = {
          "generate",      "--model", m.path(),     "--prompt", "a harbor",        "-n", "12",
          "--temperature", "0",       "--kv-dtype", d,          "--kv-block-size", block};
      const auto flash = RunWormchat(args);
      args.insert(args.end(), {"--attention", "reference"});
      const auto ref = RunWormchat(args);
      ASSERT_EQ(ref.exit_code, 0) << d << ": " << ref.err;
      ASSERT_EQ(flash.exit_code, 0) << d << ": " << flash.err;
      EXPECT_FALSE(ref.out.empty()) << d;
      EXPECT_EQ(flash.out, ref.out) << d << " block " << block;
    }
  }
}

// `bench attention` runs every format over the same tokens and reports host and emulated-mesh
// figures; the emulated K/V DRAM time follows the stored bytes: bytes / bandwidth plus a fixed
// round trip per read barrier, so its speedup over bf16 approaches 1 / (bytes ratio) from below.
TEST(KVCli, BenchAttentionComparesFormats) {
  const auto r = RunWormchat({"bench", "attention", "--kv-len", "2048", "--repeats", "1",
                              "--q-heads", "8", "--kv-heads", "2", "--head-dim", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* d : {"bf16 ", "int8 ", "fp8-e4m3 ", "fp8-e5m2 ", "bfp8 "}) {
    const size_t at = r.out.find(std::string("\n  ") + d);
    ASSERT_NE(at, std::string::npos) << d << "\n" << r.out;
    // Columns: format, row B, K+V MiB | host ms, GB/s, bound, speedup | mesh us, speedup,
    // DRAM us, speedup | bytes.
    std::string line = r.out.substr(at + 3, r.out.find('\n', at + 1) - at - 3);
    // The last column names the kernels that read the format on this CPU.
    const std::string kernel = line.substr(line.rfind('|') + 2);
    if (std::string(d) == "int8 ") {
      EXPECT_EQ(kernel.rfind("int8 dot (", 0), 0u) << line;
    } else if (std::string(d) == "bf16 ") {
      EXPECT_EQ(kernel.rfind("f32 FMA (", 0), 0u) << line;
    } else {  // fp8 and bfp8: bf16 dot products where the CPU has them
      EXPECT_TRUE(kernel == "bf16 dot (AVX-512 BF16)" || kernel.rfind("f32 FMA (", 0) == 0) << line;
    }
    for (char& c : line)
      if (c == '|' || c == 'x') c = ' ';
    std::istringstream in(line);
    std::string name;
    double row_b, mib, host_ms, gbps, bound, speedup, mesh_us, mesh_speedup, dram_us, dram_speedup,
        bytes;
    in >> name >> row_b >> mib >> host_ms >> gbps >> bound >> speedup >> mesh_us >> mesh_speedup >>
        dram_us >> dram_speedup >> bytes;
    ASSERT_FALSE(in.fail()) << line;
    EXPECT_GT(host_ms, 0.0) << line;
    EXPECT_GT(dram_speedup * bytes, 0.9) << line;
    EXPECT_LT(dram_speedup * bytes, 1.02) << line;
    if (std::string(d) != "bf16 ") {
      EXPECT_LT(bytes, 0.54) << line;
    }
  }
  EXPECT_NE(r.out.find("Outputs agree with bf16 within"), std::string::npos) << r.out;
  const auto bad = RunWormchat({"bench", "attention", "--kv-dtype", "int4"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--kv-dtype 'int4' is not supported"), std::string::npos) << bad.err;
}

}  // namespace
// WORMCHAT_SIMD=avx2 measures the AVX2 machine kind on an AVX-512 one: no AVX-512 kernel runs
// (the names say so) and the results still agree; an unknown value is a one-line error.
TEST(KVCli, SimdLimitKeepsTheKernelsOffAvx512) {
  setenv("WORMCHAT_SIMD", "avx2", 1);
  const auto r = RunWormchat({"bench", "attention", "--kv-len", "1024", "--repeats", "1",
                              "--q-heads", "16", "--kv-heads", "1", "--head-dim", "64"});
  setenv("WORMCHAT_SIMD", "bogus", 1);
  const auto bad = RunWormchat({"info"});
  unsetenv("WORMCHAT_SIMD");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("AVX-512"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("AVX3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("int8 dot ("), std::string::npos) << r.out;
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("WORMCHAT_SIMD: unknown value 'bogus'"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

}  // namespace wc
