// A benchmark, not a test (disabled; nothing is asserted): the block-float GEMM against the BF16
// GEMM (bf16 activations) on falcon-7b's matrix shapes, decode (1 token) and prefill (512),
// alternating formats round by round on the shared machine, with a streaming read between rounds
// for the bandwidth bound. Run:
//   build/tests/kernels_test --gtest_also_run_disabled_tests --gtest_filter='*GemmBfpBench*'
// (OMP_NUM_THREADS=2; WORMCHAT_SIMD=avx2 for the portable kernels; BFP_BENCH_ROUNDS=n). Also the
// packer's speed (PackOneThread).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gemm/bfp/gemm_bfp.h"
#include "kernels/gemm/gemm.h"
#include "kernels/simd_limit.h"
#include "util/bf16.h"
#include "util/page_buffer.h"
#include "util/rng.h"

namespace wc {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds of one multi-threaded streaming read of `buf` (64-bit sums, 1 MiB blocks per thread).
double StreamRead(const PageBuffer& buf, uint64_t* sink) {
  const auto* words = reinterpret_cast<const uint64_t*>(buf.data());
  const int64_t n = static_cast<int64_t>(buf.size() / 8);
  const double t0 = Now();
  uint64_t total = 0;
#pragma omp parallel for schedule(dynamic, 1 << 17) reduction(+ : total)
  for (int64_t i = 0; i < n; i += 8) {
    uint64_t s = 0;
    for (int j = 0; j < 8; ++j) s += words[i + j];
    total += s;
  }
  *sink += total;
  return Now() - t0;
}

struct Stats {
  std::vector<double> seconds;
  double Best() const { return *std::min_element(seconds.begin(), seconds.end()); }
  double Median() const {
    std::vector<double> s = seconds;
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  }
};

template <class Fn>
double TimeIt(int reps, const Fn& fn) {
  const double t0 = Now();
  for (int i = 0; i < reps; ++i) fn();
  return (Now() - t0) / reps;
}

// BFP_BENCH_TOKENS=a,b,...: the token counts to run, else `fallback`.
std::vector<int64_t> TokenCounts(std::vector<int64_t> fallback) {
  const char* v = std::getenv("BFP_BENCH_TOKENS");
  if (v == nullptr) return fallback;
  std::vector<int64_t> counts;
  const std::string list = v;
  for (size_t pos = 0; pos < list.size();) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    counts.push_back(std::max<int64_t>(1, std::atoll(list.substr(pos, comma - pos).c_str())));
    pos = comma + 1;
  }
  return counts;
}

int Rounds(int fallback) {
  const char* v = std::getenv("BFP_BENCH_ROUNDS");
  return v != nullptr ? std::max(1, std::atoi(v)) : fallback;
}

void RunShape(int64_t out, int64_t in, int64_t tokens, PageBuffer& stream, double* best_bw) {
  Rng rng(static_cast<uint64_t>(out * 31 + in));
  std::vector<uint16_t> w(static_cast<size_t>(out * in));  // [out, in] bf16
  for (auto& v : w) v = F32ToBF16(static_cast<float>(rng.Uniform() * 0.2 - 0.1));
  const MatrixRef ref{DType::kBF16, out, in, in, w.data()};
  const PackedMatrix bf16 = PackedMatrix::Pack(ref, ActivationPrecision::kBF16);
  const BfpPanels b8 =
      BfpPanels::FromMatrix(BfpFormat::kBfp8, ref, "w", ActivationPrecision::kBF16);
  const BfpPanels b4 =
      BfpPanels::FromMatrix(BfpFormat::kBfp4, ref, "w", ActivationPrecision::kBF16);
  std::vector<float> x(static_cast<size_t>(tokens * in));
  for (auto& v : x) v = static_cast<float>(rng.Uniform() * 2.0 - 1.0);
  std::vector<float> y(static_cast<size_t>(tokens * out));
  const int reps = tokens < 16 ? 10 : 1;
  Stats s16, s8, s4;
  uint64_t sink = 0;
  for (int round = 0; round < Rounds(tokens < 16 ? 15 : 4); ++round) {
    *best_bw = std::max(*best_bw, static_cast<double>(stream.size()) / StreamRead(stream, &sink));
    s16.seconds.push_back(TimeIt(reps, [&] { Gemm(x.data(), tokens, bf16, nullptr, y.data()); }));
    s8.seconds.push_back(TimeIt(reps, [&] { GemmBfp(x.data(), tokens, b8, nullptr, y.data()); }));
    s4.seconds.push_back(TimeIt(reps, [&] { GemmBfp(x.data(), tokens, b4, nullptr, y.data()); }));
  }
  std::printf("%5lld x %5lld, %3lld token%s (%s | %s):\n", static_cast<long long>(out),
              static_cast<long long>(in), static_cast<long long>(tokens), tokens == 1 ? "" : "s",
              GemmKernelName(bf16), GemmBfpKernelName(b8).c_str());
  const double bw = *best_bw;
  auto line = [&](const char* name, const Stats& s, double bytes) {
    const double best = s.Best(), med = s.Median();
    std::printf(
        "  %-5s %7.1f MB  best %8.3f ms  median %8.3f ms  %7.1f tok/s  %5.1f GB/s  "
        "%3.0f%% of read bound  x%.2f bf16 (median x%.2f)\n",
        name, bytes / 1e6, best * 1e3, med * 1e3, tokens / best, bytes / best / 1e9,
        100.0 * (bytes / bw) / best, s16.Best() / best, s16.Median() / med);
  };
  line("bf16", s16, static_cast<double>(bf16.bytes()));
  line("bfp8", s8, static_cast<double>(b8.bytes()));
  line("bfp4", s4, static_cast<double>(b4.bytes()));
  std::printf("  read bandwidth (best streaming read so far, %d threads): %.1f GB/s\n",
              omp_get_max_threads(), bw / 1e9);
  std::fflush(stdout);
}

TEST(GemmBfpBench, DISABLED_FalconShapes) {
  ApplySimdLimit();
  PageBuffer stream(size_t{1} << 30);
  for (size_t i = 0; i < stream.size(); i += 4096) stream.data()[i] = 1;
  double bw = 0;
  const int64_t shapes[3][2] = {{4544, 18176}, {18176, 4544}, {4672, 4544}};
  std::printf("SIMD limit %s, %d threads\n", SimdLimitName().c_str(), omp_get_max_threads());
  // BFP_BENCH_TOKENS=5,9 runs those token counts (a verify step's) instead of 1 and 512.
  std::vector<int64_t> counts = {1, 512};
  if (std::getenv("BFP_BENCH_NO_PREFILL") != nullptr) counts = {1};
  counts = TokenCounts(counts);
  for (const int64_t n : counts)
    for (const auto& s : shapes) RunShape(s[0], s[1], n, stream, &bw);
}

// The kernels' own speed, weights hot in L2 on one thread: what widening costs per byte, apart
// from the bus (decode must keep up with ~15-30 GB/s a core).
TEST(GemmBfpBench, DISABLED_InCacheOneThread) {
  ApplySimdLimit();
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const int64_t out = 256, in = 2048;
  Rng rng(1);
  std::vector<uint16_t> w(static_cast<size_t>(out * in));
  for (auto& v : w) v = F32ToBF16(static_cast<float>(rng.Uniform() * 0.2 - 0.1));
  const MatrixRef ref{DType::kBF16, out, in, in, w.data()};
  const PackedMatrix bf16 = PackedMatrix::Pack(ref, ActivationPrecision::kBF16);
  const BfpPanels b8 =
      BfpPanels::FromMatrix(BfpFormat::kBfp8, ref, "w", ActivationPrecision::kBF16);
  const BfpPanels b4 =
      BfpPanels::FromMatrix(BfpFormat::kBfp4, ref, "w", ActivationPrecision::kBF16);
  // BFP_BENCH_TOKENS=n,... runs those counts only (e.g. either side of BfpWidenOnceTokens).
  const int64_t t = BfpWidenOnceTokens(b8);
  const std::vector<int64_t> counts = TokenCounts({1, 12, t - 1, t});
  for (int64_t tokens : counts) {
    std::vector<float> x(static_cast<size_t>(tokens * in), 0.5f),
        y(static_cast<size_t>(tokens * out));
    Stats s16, s8, s4;
    // BFP_BENCH_ONLY=bf16|bfp8|bfp4 runs one format (for perf stat's cycles per weight).
    const char* only_env = std::getenv("BFP_BENCH_ONLY");
    const std::string only = only_env != nullptr ? only_env : "";
    auto on = [&](const char* f) { return only.empty() || only == f; };
    for (int round = 0; round < Rounds(20); ++round) {
      s16.seconds.push_back(
          on("bf16") ? TimeIt(50, [&] { Gemm(x.data(), tokens, bf16, nullptr, y.data()); }) : 1);
      s8.seconds.push_back(
          on("bfp8") ? TimeIt(50, [&] { GemmBfp(x.data(), tokens, b8, nullptr, y.data()); }) : 1);
      s4.seconds.push_back(
          on("bfp4") ? TimeIt(50, [&] { GemmBfp(x.data(), tokens, b4, nullptr, y.data()); }) : 1);
    }
    const double weights = static_cast<double>(out * in);
    std::printf("in L2, 1 thread, %lld token(s) (%s):\n", static_cast<long long>(tokens),
                GemmBfpKernelName(b8).c_str());
    auto line = [&](const char* name, const Stats& s, double bytes) {
      std::printf("  %-5s best %7.1f us  %6.1f G weights/s  %6.1f GB/s  x%.2f bf16 time\n", name,
                  s.Best() * 1e6, weights / s.Best() / 1e9, bytes / s.Best() / 1e9,
                  s.Best() / s16.Best());
    };
    line("bf16", s16, static_cast<double>(bf16.bytes()));
    line("bfp8", s8, static_cast<double>(b8.bytes()));
    line("bfp4", s4, static_cast<double>(b4.bytes()));
  }
  omp_set_num_threads(saved);
}

// The packer's speed (BfpPanels::FromMatrix: gather, encode, reorder), one thread, a bf16
// falcon-7b MLP matrix: M weights/s (WORMCHAT_SIMD=avx2 for the AVX2 encoder).
TEST(GemmBfpBench, DISABLED_PackOneThread) {
  ApplySimdLimit();
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const int64_t out = 4544, in = 18176;
  Rng rng(3);
  std::vector<uint16_t> w(static_cast<size_t>(out * in));
  for (auto& v : w) v = F32ToBF16(static_cast<float>(rng.Uniform() * 0.2 - 0.1));
  const MatrixRef ref{DType::kBF16, out, in, in, w.data()};
  for (BfpFormat f : {BfpFormat::kBfp8, BfpFormat::kBfp4}) {
    double best = 1e9;
    for (int round = 0; round < Rounds(3); ++round) {
      const double t0 = Now();
      const BfpPanels p = BfpPanels::FromMatrix(f, ref, "w", ActivationPrecision::kBF16);
      best = std::min(best, Now() - t0);
    }
    std::printf("pack %s, 1 thread (%s): best %.3f s, %.0f M weights/s\n", BfpFormatName(f),
                SimdLimitName().c_str(), best, static_cast<double>(out * in) / best / 1e6);
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace wc
