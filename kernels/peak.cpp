#include "kernels/peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "kernels/attention/decode_attention_bf16dot.h"
#include "kernels/cpu_kernels.h"

// GCC 12 reports the "undefined" source operand inside its own AVX-512 reduction intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/peak.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// `iters` rounds of 12 independent FMA chains (enough to hide a 4-cycle latency on two pipes);
// returns the FLOPs done. The result goes to *sink so nothing is optimized away.
double FmaChains(int64_t iters, float* sink) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.9999999f), c = hn::Set(d, 1e-7f);
  // Distinct starting values: identical chains would be merged into one by the compiler.
  auto a0 = hn::Set(d, 1.00f), a1 = hn::Set(d, 1.01f), a2 = hn::Set(d, 1.02f);
  auto a3 = hn::Set(d, 1.03f), a4 = hn::Set(d, 1.04f), a5 = hn::Set(d, 1.05f);
  auto a6 = hn::Set(d, 1.06f), a7 = hn::Set(d, 1.07f), a8 = hn::Set(d, 1.08f);
  auto a9 = hn::Set(d, 1.09f), a10 = hn::Set(d, 1.10f), a11 = hn::Set(d, 1.11f);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = hn::MulAdd(a0, m, c), a1 = hn::MulAdd(a1, m, c), a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c), a4 = hn::MulAdd(a4, m, c), a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c), a7 = hn::MulAdd(a7, m, c), a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c), a10 = hn::MulAdd(a10, m, c), a11 = hn::MulAdd(a11, m, c);
  }
  const auto s = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                         hn::Add(hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)),
                                 hn::Add(hn::Add(a8, a9), hn::Add(a10, a11))));
  *sink += hn::GetLane(hn::SumOfLanes(d, s));
  return static_cast<double>(iters) * 12 * hn::Lanes(d) * 2;
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(FmaChains);

namespace {

#define WC_BF16 __attribute__((target("avx512f,avx512bf16")))

// As FmaChains, with vdpbf16ps: each of the 16 f32 lanes adds two bf16 products (4 FLOPs).
WC_BF16 double Bf16DotChains(int64_t iters, float* sink) {
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = a;  // bf16 1.0
  // Distinct starting values: identical chains would be merged into one by the compiler.
  __m512 s0 = _mm512_set1_ps(0), s1 = _mm512_set1_ps(1), s2 = _mm512_set1_ps(2);
  __m512 s3 = _mm512_set1_ps(3), s4 = _mm512_set1_ps(4), s5 = _mm512_set1_ps(5);
  __m512 s6 = _mm512_set1_ps(6), s7 = _mm512_set1_ps(7), s8 = _mm512_set1_ps(8);
  __m512 s9 = _mm512_set1_ps(9), s10 = _mm512_set1_ps(10), s11 = _mm512_set1_ps(11);
  for (int64_t i = 0; i < iters; ++i) {
    s0 = _mm512_dpbf16_ps(s0, a, b), s1 = _mm512_dpbf16_ps(s1, a, b);
    s2 = _mm512_dpbf16_ps(s2, a, b), s3 = _mm512_dpbf16_ps(s3, a, b);
    s4 = _mm512_dpbf16_ps(s4, a, b), s5 = _mm512_dpbf16_ps(s5, a, b);
    s6 = _mm512_dpbf16_ps(s6, a, b), s7 = _mm512_dpbf16_ps(s7, a, b);
    s8 = _mm512_dpbf16_ps(s8, a, b), s9 = _mm512_dpbf16_ps(s9, a, b);
    s10 = _mm512_dpbf16_ps(s10, a, b), s11 = _mm512_dpbf16_ps(s11, a, b);
  }
  const __m512 s =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)),
                                  _mm512_add_ps(_mm512_add_ps(s4, s5), _mm512_add_ps(s6, s7))),
                    _mm512_add_ps(_mm512_add_ps(s8, s9), _mm512_add_ps(s10, s11)));
  *sink += _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * 12 * 16 * 4;
}

#define WC_AVX2 __attribute__((target("avx2")))

// 8 chains s += step(a, b) over 2 x 4 operand pairs, chains and operands held in registers (with
// 8 operands, 18 registers, GCC kept some on the stack and each chain waited on its store: the
// int8 peak read 290 GOP/s of 437; docs/performance.md, "the AVX2 integer tiles in registers").
// Returns the operations of `iters` rounds, `ops` a step.
template <typename Step>
WC_AVX2 double IntegerChains(int64_t iters, float* sink, __m256i a0, __m256i a1, __m256i b0,
                             __m256i b1, __m256i b2, __m256i b3, Step step, int ops) {
  __m256i s0 = _mm256_set1_epi32(0), s1 = _mm256_set1_epi32(1), s2 = _mm256_set1_epi32(2);
  __m256i s3 = _mm256_set1_epi32(3), s4 = _mm256_set1_epi32(4), s5 = _mm256_set1_epi32(5);
  __m256i s6 = _mm256_set1_epi32(6), s7 = _mm256_set1_epi32(7);
  for (int64_t i = 0; i < iters; ++i) {
    s0 = _mm256_add_epi32(s0, step(a0, b0)), s1 = _mm256_add_epi32(s1, step(a0, b1));
    s2 = _mm256_add_epi32(s2, step(a0, b2)), s3 = _mm256_add_epi32(s3, step(a0, b3));
    s4 = _mm256_add_epi32(s4, step(a1, b0)), s5 = _mm256_add_epi32(s5, step(a1, b1));
    s6 = _mm256_add_epi32(s6, step(a1, b2)), s7 = _mm256_add_epi32(s7, step(a1, b3));
    // The operands look new each round, or the products would be hoisted out of the loop.
    __asm__ volatile(""
                     : "+x"(b0), "+x"(b1), "+x"(b2), "+x"(b3), "+x"(s0), "+x"(s1), "+x"(s2),
                       "+x"(s3), "+x"(s4), "+x"(s5), "+x"(s6), "+x"(s7));
  }
  const __m256i s =
      _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3)),
                       _mm256_add_epi32(_mm256_add_epi32(s4, s5), _mm256_add_epi32(s6, s7)));
  *sink += static_cast<float>(_mm256_extract_epi32(s, 0));
  return static_cast<double>(iters) * 8 * ops;
}

// The quantized GEMM's AVX2 integer step (quant_gemm_avx2.cpp): per 32 byte pairs, vpmaddubsw (u8
// x s8 pairs summed to s16), vpmaddwd by ones (s16 pairs to s32), then vpaddd into the chain; 32
// multiplies and 32 adds (64 operations).
struct Int8Avx2Step {
  __m256i ones;
  WC_AVX2 __m256i operator()(__m256i a, __m256i b) const {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones);
  }
};
WC_AVX2 double Int8Avx2Chains(int64_t iters, float* sink) {
  return IntegerChains(iters, sink, _mm256_set1_epi8(1), _mm256_set1_epi8(2), _mm256_set1_epi8(-1),
                       _mm256_set1_epi8(-2), _mm256_set1_epi8(-3), _mm256_set1_epi8(-4),
                       Int8Avx2Step{_mm256_set1_epi16(1)}, 64);
}

// The int16 GEMM's step (bf16_int16_avx2.cpp): vpmaddwd (16 s16 x s16 products summed in pairs to
// s32), then vpaddd into the chain; 16 multiplies and 16 adds (32 operations).
struct Int16Avx2Step {
  WC_AVX2 __m256i operator()(__m256i a, __m256i b) const { return _mm256_madd_epi16(a, b); }
};
WC_AVX2 double Int16Avx2Chains(int64_t iters, float* sink) {
  return IntegerChains(iters, sink, _mm256_set1_epi16(3), _mm256_set1_epi16(5),
                       _mm256_set1_epi16(-4), _mm256_set1_epi16(-3), _mm256_set1_epi16(-2),
                       _mm256_set1_epi16(-1), Int16Avx2Step{}, 32);
}

#define WC_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

// As FmaChains, with the quantized GEMM's VNNI step (quant_gemm_vnni.cpp): vpdpbusd on 512 bits,
// 64 byte products summed into 16 lanes (128 operations) an instruction, 12 chains.
WC_VNNI double Int8VnniChains(int64_t iters, float* sink) {
  const __m512i a = _mm512_set1_epi8(1);
  __m512i bs[4];
  for (int i = 0; i < 4; ++i) bs[i] = _mm512_set1_epi8(static_cast<char>(i - 2));
  __m512i s[12];
  for (int i = 0; i < 12; ++i) s[i] = _mm512_set1_epi32(i);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 12; ++k) s[k] = _mm512_dpbusd_epi32(s[k], a, bs[k % 4]);
    __asm__ volatile("" : "+v"(bs[0]), "+v"(bs[1]), "+v"(bs[2]), "+v"(bs[3]));
  }
  __m512i t = s[0];
  for (int k = 1; k < 12; ++k) t = _mm512_add_epi32(t, s[k]);
  *sink += static_cast<float>(_mm512_reduce_add_epi32(t));
  return static_cast<double>(iters) * 12 * 128;
}

#define WC_AMX __attribute__((target("amx-tile,amx-bf16")))

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// As FmaChains, with TDPBF16PS: 4 C tiles (16 x 16 f32) from 2 A and 2 B tiles (16 x 32 bf16),
// each instruction 16 x 16 x 32 products (16384 FLOPs).
WC_AMX double AmxTileChains(int64_t iters, float* sink) {
  alignas(64) static const uint16_t ones[16 * 32] = {};  // zeros: the values do not matter
  AmxTileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = 16;
    config.colsb[t] = 64;
  }
  // GCC 12's _tile_loadconfig declares a one-byte operand: keep the other stores before it.
  __asm__ volatile("" ::: "memory");
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[16 * 16];
  _tile_stored(0, c, 64);
  _tile_release();
  *sink += c[0];
  return static_cast<double>(iters) * 4 * 16384;
}

// FLOP/s of `chains` run on every thread at once, best of three rounds of about `seconds`.
template <typename F>
double Rate(F chains, double seconds) {
  // Calibrate the iteration count on one thread, then time all threads together.
  float sink = 0;
  int64_t iters = 1 << 16;
  while (true) {
    const auto t0 = std::chrono::steady_clock::now();
    chains(iters, &sink);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > seconds / 4 || iters > (int64_t{1} << 40)) {
      iters = static_cast<int64_t>(iters * seconds / std::max(s, 1e-9));
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    double flops = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : flops)
    {
      float local = 0;
      flops += chains(iters, &local);
#pragma omp atomic
      sink += local;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops / s);
  }
  volatile float keep = sink;
  (void)keep;
  return best;
}

}  // namespace

PeakFlops MeasurePeakFlops(double seconds, bool int16) {
  PeakFlops p;
  p.f32_fma =
      Rate([](int64_t n, float* s) { return HWY_DYNAMIC_DISPATCH(FmaChains)(n, s); }, seconds);
  if (CpuHasBf16DotKernels()) p.bf16_dot = Rate(Bf16DotChains, seconds);
  if (CpuHas(CpuKernels::kAmxBf16Gemm)) p.amx_bf16 = Rate(AmxTileChains, seconds);
  if (CpuHas(CpuKernels::kAvx2Int8)) p.int8_avx2 = Rate(Int8Avx2Chains, seconds);
  if (CpuHas(CpuKernels::kAvx512Vnni)) p.int8_vnni = Rate(Int8VnniChains, seconds);
  if (int16 && CpuHas(CpuKernels::kAvx2Int8)) p.int16_avx2 = Rate(Int16Avx2Chains, seconds);
  return p;
}

}  // namespace wc
#endif  // HWY_ONCE
