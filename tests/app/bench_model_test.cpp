// `wormchat bench model` end to end at tiny sizes (the figures themselves are for the README, not
// for tests): every measurement and bound is reported, in the text and in --json, as a positive
// number with its share of the bound (the read bound from the probe's passes interleaved with the
// decode runs, a figure above its bound flagged); the bf16 dot-product peak exactly when the CPU
// has the instructions; bad values refused naming the flag.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/attention/decode_attention_bf16dot.h"
#include "tests/test_util.h"

namespace wc {
namespace {

using nlohmann::json;
using test::RunWormchat;

TEST(BenchModel, ReportsEveryFigureWithItsBound) {
  test::TempDir dir;
  const test::RunResult r =
      RunWormchat({"bench", "model", "--model", test::FixtureDir("mq_f32"), "--threads", "2",
                   "--prompt-len", "16", "--gen-len", "6", "--decode-rows", "1,3", "--repeats", "2",
                   "--json", dir.File("b.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle :
       {"machine: f32 FMA", "read bound ", "best of 11 passes over the packed weights", "2 threads",
        "prefill   16 tokens:", "decode   1 row :", "decode   3 rows:", "x 1 row",
        "memory after load: peak RSS", "memory: peak RSS"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  const json j = json::parse(test::ReadFile(dir.File("b.json")));
  EXPECT_GT(j.at("read_gbps").get<double>(), 0);
  // The probe: 3 passes, then one before and one after each of the 2 x 2 decode runs, over the
  // packed matrices (the 4 of each layer and the LM head) on the run's threads.
  const json& probe = j.at("read_probe");
  EXPECT_EQ(probe.at("passes"), 3 + 2 * 2 * 2);
  EXPECT_EQ(probe.at("threads"), 2);
  EXPECT_GT(probe.at("bytes").get<double>(), 0);
  EXPECT_EQ(probe.at("bytes").get<double>(), j.at("weight_bytes_step").get<double>());
  EXPECT_NE(r.out.find(probe.at("description").get<std::string>()), std::string::npos);
  int exceeded = 0;
  EXPECT_GT(j.at("f32_fma_gflops").get<double>(), 0);
  EXPECT_EQ(j.at("bf16_dot_gflops").get<double>() > 0, CpuHasBf16DotKernels());
  EXPECT_EQ(j.at("amx_bf16_gflops").get<double>() > 0, CpuHas(CpuKernels::kAmxBf16Gemm));
  EXPECT_EQ(j.at("int8_avx2_gops").get<double>() > 0, CpuHas(CpuKernels::kAvx2Int8));
  EXPECT_EQ(j.at("int8_vnni_gops").get<double>() > 0, CpuHas(CpuKernels::kAvx512Vnni));
  EXPECT_EQ(j.at("weights_dtype"), "F32");
  EXPECT_EQ(j.at("weights_formats"), "f32");
  EXPECT_EQ(j.at("kv_dtype"), "f32");  // auto: the checkpoint's precision
  const json& p = j.at("prefill");
  EXPECT_EQ(p.at("tokens"), 16);
  EXPECT_GT(p.at("tokens_per_s").get<double>(), 0);
  EXPECT_GT(p.at("bound_tokens_per_s").get<double>(), 0);
  EXPECT_NEAR(p.at("fraction_of_bound").get<double>(),
              p.at("tokens_per_s").get<double>() / p.at("bound_tokens_per_s").get<double>(), 1e-9);
  // Each GEMM of the prefill passes by role, against its kernel's peak; with the time outside the
  // GEMMs, the table's lines.
  const json& gemms = p.at("gemms");
  std::vector<std::string> roles;
  for (const json& g : gemms) {
    roles.push_back(g.at("matrix"));
    EXPECT_NE(g.at("kernel").get<std::string>(), "") << g;
    EXPECT_GT(g.at("gflops").get<double>(), 0) << g;
    EXPECT_GT(g.at("peak_gflops").get<double>(), 0) << g;
    EXPECT_NEAR(g.at("fraction_of_peak").get<double>(),
                g.at("gflops").get<double>() / g.at("peak_gflops").get<double>(), 1e-9);
    EXPECT_GT(g.at("ms_per_pass").get<double>(), 0) << g;
    EXPECT_NE(r.out.find("  " + g.at("matrix").get<std::string>() + " "), std::string::npos);
  }
  EXPECT_EQ(roles,
            (std::vector<std::string>{"self_attention.query_key_value", "self_attention.dense",
                                      "mlp.dense_h_to_4h", "mlp.dense_4h_to_h", "lm_head"}));
  // mq_f32 has 2 layers: 2 calls of each layer matrix a pass, 1 of the LM head.
  EXPECT_EQ(gemms[0].at("calls_per_pass"), 2);
  EXPECT_EQ(gemms[4].at("calls_per_pass"), 1);
  for (const char* needle : {"of the pass\n", "of the pass (attention, norms, the loop)"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  ASSERT_EQ(j.at("decode").size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& d = j.at("decode")[i];
    EXPECT_EQ(d.at("rows"), i == 0 ? 1 : 3);
    EXPECT_GT(d.at("tokens_per_s").get<double>(), 0);
    EXPECT_GT(d.at("bandwidth_bound_tokens_per_s").get<double>(), 0);
    EXPECT_GT(d.at("fma_bound_tokens_per_s").get<double>(), 0);
    EXPECT_GT(d.at("fraction_of_bound").get<double>(), 0);
    // A figure above its bound is said so, in the JSON and in one line of the text.
    const double bound = std::min(d.at("bandwidth_bound_tokens_per_s").get<double>(),
                                  d.at("fma_bound_tokens_per_s").get<double>());
    EXPECT_EQ(d.at("exceeds_bound").get<bool>(),
              d.at("fastest_tokens_per_s").get<double>() > bound);
    EXPECT_GE(d.at("fastest_tokens_per_s").get<double>(), d.at("tokens_per_s").get<double>());
    exceeded += d.at("exceeds_bound").get<bool>() ? 1 : 0;
  }
  EXPECT_EQ(j.at("bound_exceeded").get<bool>(), exceeded > 0);
  EXPECT_EQ(r.out.find("EXCEEDS ITS BOUND") != std::string::npos, exceeded > 0) << r.out;
  EXPECT_EQ(r.out.find("warning: ") != std::string::npos, exceeded > 0) << r.out;
  EXPECT_GT(j.at("memory").at("peak_rss_bytes").get<double>(),
            j.at("memory").at("weight_bytes").get<double>());
}

TEST(BenchModel, BadValuesAreRefusedNamingTheFlag) {
  const std::string model = test::FixtureDir("mq_f32");  // context 64
  const test::RunResult rows = RunWormchat({"bench", "model", "--decode-rows", "0"});
  EXPECT_EQ(rows.exit_code, 2);
  EXPECT_NE(rows.err.find("--decode-rows"), std::string::npos) << rows.err;
  const test::RunResult ctx =
      RunWormchat({"bench", "model", "--model", model, "--prompt-len", "100"});
  EXPECT_EQ(ctx.exit_code, 1);
  EXPECT_NE(ctx.err.find("--prompt-len 100"), std::string::npos) << ctx.err;
  EXPECT_NE(ctx.err.find("context of 64"), std::string::npos) << ctx.err;
  EXPECT_EQ(test::CountLines(ctx.err), 1) << ctx.err;
}

}  // namespace
}  // namespace wc
