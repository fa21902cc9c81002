#include "kernels/gemm_bf16dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/x86_avx512.h"

#define WC_GEMM_BF16DOT __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

namespace wc {
namespace {

constexpr int kPanelVecs = 2;  // 16 rows (one bf16 pair each) per vector, 32 rows per panel
constexpr int kAccBudget = 24;

constexpr bool Fits(int mr, int np) {
  return np == 1 || mr * np * kPanelVecs <= kAccBudget;
}

// out[t][j * 16 + lane]: acc = vdpbf16ps(acc, W pair, x pair) over every k pair, per chain.
//   xp: [k_steps][MR] pairs (as floats' bits); w: NP panels, panel_bytes apart, [k_steps][32][2].
template <int MR, int NP>
WC_GEMM_BF16DOT __attribute__((noinline)) void Tile(const float* __restrict xp,
                                                    const uint8_t* __restrict w,
                                                    int64_t panel_bytes, int64_t k_steps,
                                                    float* __restrict out) {
  constexpr int NV = NP * kPanelVecs;
  __m512 acc[MR][NV];
  for (int t = 0; t < MR; ++t)
    for (int j = 0; j < NV; ++j) acc[t][j] = _mm512_setzero_ps();
  const uint8_t* wp[NP];
  for (int p = 0; p < NP; ++p) wp[p] = w + p * panel_bytes;
  for (int64_t k = 0; k < k_steps; ++k) {
    // One token is bound by the read rate: fetch 16 k steps (2 KiB) ahead in each panel, as the
    // block-float one-token tile does (gemm_bfp_one_token.h).
    if (MR == 1 && k % 4 == 0 && k + 20 <= k_steps) {
      for (int p = 0; p < NP; ++p)
        for (int l = 0; l < 8; ++l) _mm_prefetch(wp[p] + (k + 16) * 128 + l * 64, _MM_HINT_T0);
    }
    __m512i wv[NV];
    for (int j = 0; j < NV; ++j)
      wv[j] = _mm512_load_si512(wp[j / kPanelVecs] + k * 128 + (j % kPanelVecs) * 64);
    for (int t = 0; t < MR; ++t) {
      const __m512bh xb = (__m512bh)_mm512_set1_ps(xp[k * MR + t]);
      for (int j = 0; j < NV; ++j) acc[t][j] = _mm512_dpbf16_ps(acc[t][j], (__m512bh)wv[j], xb);
    }
  }
  for (int t = 0; t < MR; ++t)
    for (int j = 0; j < NV; ++j) _mm512_store_ps(out + (t * NV + j) * 16, acc[t][j]);
}

struct TileFn {
  int64_t panel_bytes, k_steps;
  int MaxPanels(int mr) const { return Fits(mr, 4) ? 4 : Fits(mr, 2) ? 2 : 1; }
  template <int MR>
  void Run(int np, const float* xp, const uint8_t* w, float* out) const {
    if constexpr (Fits(MR, 4)) {
      if (np == 4) return Tile<MR, 4>(xp, w, panel_bytes, k_steps, out);
    }
    if constexpr (Fits(MR, 2)) {
      if (np == 2) return Tile<MR, 2>(xp, w, panel_bytes, k_steps, out);
    }
    return Tile<MR, 1>(xp, w, panel_bytes, k_steps, out);
  }
  void operator()(int mr, int np, const float* xp, const uint8_t* w, float* out) const {
    gemm::WithTileHeight(mr, [&](auto height) { Run<decltype(height)::value>(np, xp, w, out); });
  }
};

}  // namespace

WC_GEMM_BF16DOT void PackBf16PairsRow(const float* x, int64_t cols, int64_t padded_cols, int mr,
                                      int t, float* dst) {
  alignas(64) uint32_t pairs[16];
  for (int64_t k = 0; k < padded_cols; k += 32) {
    const int64_t left = cols - k;
    const __mmask16 lo = left >= 16 ? 0xffff : left <= 0 ? 0 : (1u << left) - 1;
    const __mmask16 hi = left >= 32 ? 0xffff : left <= 16 ? 0 : (1u << (left - 16)) - 1;
    const __m512 a = _mm512_maskz_loadu_ps(lo, x + k);
    const __m512 b = _mm512_maskz_loadu_ps(hi, x + k + 16);
    _mm512_store_si512(pairs, (__m512i)_mm512_cvtne2ps_pbh(b, a));  // x[k .. k + 31] in order
    const int64_t n = std::min<int64_t>(16, (padded_cols - k) / 2);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&dst[(k / 2 + i) * mr + t], &pairs[i], 4);
  }
}

void GemmBf16DotRange(const gemm::Task& task, int64_t pa, int64_t pb) {
  gemm::RunPanels(task, pa, pb, TileFn{task.panel_bytes, task.k_steps});
}

}  // namespace wc
