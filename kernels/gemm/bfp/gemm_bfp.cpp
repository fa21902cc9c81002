// GemmBfp (gemm_bfp.h): input packing, the kernel choice, threading, and the portable tiles
// (Highway): each code widened in registers to its exact f32 value (sign | magnitude converted,
// times the block's power of two), then the BF16 GEMM's order (kBF16: per k tile an even-k and an
// odd-k chain, under FTZ, so a bf16 subnormal flushes as the BF16 panels' packer flushes it) or the
// f32 chain (kF32). One token on plain panels takes the AVX-512F tile (gemm_bfp_one_token.h) where
// the CPU has it; below AVX-512 the pairs path's calls below the widen-once threshold run the
// row-group tiles (gemm_bfp_row_groups.h).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm/bf16/gemm_amx.h"
#include "kernels/gemm/bf16/gemm_bf16_dot.h"
#include "kernels/gemm/bfp/bfp_int8.h"
#include "kernels/gemm/bfp/gemm_bfp.h"
#include "kernels/gemm/bfp/gemm_bfp_amx.h"
#include "kernels/gemm/bfp/gemm_bfp_one_token.h"
#include "kernels/gemm/bfp/gemm_bfp_row_groups.h"
#include "kernels/gemm/format_table.h"
#include "kernels/gemm/gemm_schedule.h"
#include "kernels/gemm/ieee_subnormals.h"
#include "kernels/gemm/quant/quant_gemm_x86.h"
#include "util/bf16.h"
#include "util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm/bfp/gemm_bfp.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/gemm/bfp/bfp_widen-inl.h"
#include "kernels/gemm/exact_fma-inl.h"

#ifndef WC_KERNELS_GEMM_BFP_PATHS_
#define WC_KERNELS_GEMM_BFP_PATHS_
namespace wc {
// The kernels a BfpGemmInput is laid out for.
enum BfpPath : int { kBfpPathF32 = 0, kBfpPathPairs = 1 };

// What a panel is widened into: the BF16 GEMM's packed panel of its decoded values (kPairs:
// [K32 / 2][32] uint32, bf16(k + 1) << 16 | bf16(k), subnormals zero of their sign, as the BF16
// panels' packer flushes them), the F32 GEMM's (kF32: [K32][32] f32, exact), or the pairs kernel's
// f32 halves (kHalves: per tile [2][16][32], the even k's rows then the odd k's, the kPairs values
// as f32; gemm_schedule.h's PortableHalvesChunk).
enum class WidenTo { kPairs, kF32, kHalves };

}  // namespace wc
#endif

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using bfp::BlockUnit;
using bfp::BlockUnits;
using bfp::BlockUnitsOf;
using bfp::DF;
using bfp::DI;
using bfp::DU;
using bfp::VF;
using bfp::VI;
using bfp::VU;
using bfp::Widen4;
using bfp::Widen8;
constexpr int kLanes = static_cast<int>(hn::MaxLanes(DF()));
constexpr int kHalfVecs = 16 / kLanes;  // vectors across one half (16 rows) of a panel
constexpr int kPanelVecs = 2 * kHalfVecs;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kAccBudget = 24, kPairAccBudget = 8;  // of 32 vector registers (pairs: x2)
#else
// of 16 (pairs: x2; below AVX-512 the pairs path runs gemm_bfp_row_groups.h's tiles instead)
constexpr int kAccBudget = 12, kPairAccBudget = 8;
#endif

template <bool kPairs>
constexpr int MaxTokens() {
  return std::max(
      1, std::min(gemm::kMaxTileTokens, (kPairs ? kPairAccBudget : kAccBudget) / kPanelVecs));
}
template <bool kPairs>
constexpr bool Fits(int mr, int np) {
  return mr <= MaxTokens<kPairs>() &&
         (np == 1 || mr * np * kPanelVecs <= (kPairs ? kPairAccBudget : kAccBudget));
}

// a * b + c rounded once on every target (exact_fma-inl.h).
HWY_INLINE VF Fma(VF a, VF b, VF c) {
  return ExactFma(a, b, c);
}

// The pair (k, k + 1) of weights w0, w1 into chain j of every token: kPairs k into the even chain
// acc and k + 1 into the odd one (the BF16 GEMM's order), else both into acc, k first. xp: the
// tile's input (see Tile).
template <int MR, int NV, int NO, bool kPairs>
HWY_INLINE void Chain(VF (&acc)[MR][NV], VF (&odd)[MR][NO], int j, VF w0, VF w1,
                      const float* HWY_RESTRICT xp, int64_t k) {
  const DF df;
  for (int t = 0; t < MR; ++t) {
    if constexpr (kPairs) {
      const float* xt = xp + ((k / 2) * MR + t) * 2;
      acc[t][j] = Fma(hn::Set(df, xt[0]), w0, acc[t][j]);
      odd[t][j] = Fma(hn::Set(df, xt[1]), w1, odd[t][j]);
    } else {
      acc[t][j] = Fma(hn::Set(df, xp[k * MR + t]), w0, acc[t][j]);
      acc[t][j] = Fma(hn::Set(df, xp[(k + 1) * MR + t]), w1, acc[t][j]);
    }
  }
}

// One token on plain panels (the AVX-512 one-token tile's trick, gemm_bfp_one_token.h): x'(p, h, k)
// = x(k) times its block's unit, exact when x is zero or x' a finite normal, for every block of a k
// tile; then the weights are the bare code values and x' q is x w exactly, so the chains are the
// same bits without a multiply per weight. Returns false (xs unusable) when some x' is not exact.
//   x: the tile's 32 activations (f32; bf16 values under kPairs); unit, xs: [NP][2][32].
template <int NP>
HWY_INLINE bool ScaledTileX(const float* HWY_RESTRICT x, const float (*unit)[2][32],
                            float (*xs)[2][32]) {
  const DF df;
  const VF tiny = hn::Set(df, 1.17549435e-38f), huge = hn::Set(df, 3.40282347e+38f);
  bool exact = true;
  for (int p = 0; p < NP; ++p) {
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 32; k += kLanes) {
        const VF xv = hn::LoadU(df, x + k);
        const VF scaled = hn::Mul(xv, hn::LoadU(df, &unit[p][h][k]));
        const VF a = hn::Abs(scaled);
        const auto good =
            hn::Or(hn::Eq(xv, hn::Zero(df)), hn::And(hn::Ge(a, tiny), hn::Le(a, huge)));
        exact = exact && hn::AllTrue(df, good);
        hn::StoreU(scaled, df, &xs[p][h][k]);
      }
    }
  }
  return exact;
}

// ScaledTileX's tile: as Chain, one token, x' in place of x.
template <int MR, int NV, int NO, bool kPairs>
HWY_INLINE void ChainScaled(VF (&acc)[MR][NV], VF (&odd)[MR][NO], int j, VF w0, VF w1, float x0,
                            float x1) {
  static_assert(MR == 1, "one token");
  const DF df;
  if constexpr (kPairs) {
    acc[0][j] = Fma(hn::Set(df, x0), w0, acc[0][j]);
    odd[0][j] = Fma(hn::Set(df, x1), w1, odd[0][j]);
  } else {
    acc[0][j] = Fma(hn::Set(df, x0), w0, acc[0][j]);
    acc[0][j] = Fma(hn::Set(df, x1), w1, acc[0][j]);
  }
}

// One k tile's codes into the chains (Tile's): kScaled (MR = 1) by the bare code values and xs
// (x'), else by the decoded values and xp.
template <int MR, int NP, int B, bool kPairs, bool kScaled, int NO>
HWY_INLINE void TileStep(VF (&acc)[MR][NP * kPanelVecs], VF (&odd)[MR][NO],
                         const uint8_t* HWY_RESTRICT w, int64_t panel_bytes, int64_t tk,
                         const float (*unit)[2][32], const float (*xs)[2][32],
                         const float* HWY_RESTRICT xp) {
  constexpr int NV = NP * kPanelVecs;
  constexpr int kChunkK = 8;  // bfp4: k per 64-byte chunk of one half
  constexpr int64_t kTileBytes = B == 7 ? 1088 : 576;
  const DF df;
  const DU du;
  if constexpr (B == 7) {
    for (int kp = 0; kp < 16; ++kp) {
      const int k = 2 * kp;
      for (int p = 0; p < NP; ++p) {
        const uint8_t* row = w + p * panel_bytes + tk * kTileBytes + 64 + 32 * k;
        for (int h = 0; h < 2; ++h) {
          for (int v = 0; v < kHalfVecs; ++v) {
            const int j = (p * 2 + h) * kHalfVecs + v, n = 16 * h + v * kLanes;
            const VF w0 = Widen8<kScaled>(row + n, hn::Set(df, unit[p][h][k]));
            const VF w1 = Widen8<kScaled>(row + 32 + n, hn::Set(df, unit[p][h][k + 1]));
            if constexpr (kScaled) {
              ChainScaled<MR, NV, NO, kPairs>(acc, odd, j, w0, w1, xs[p][h][k], xs[p][h][k + 1]);
            } else {
              Chain<MR, NV, NO, kPairs>(acc, odd, j, w0, w1, xp, tk * 32 + k);
            }
          }
        }
      }
    }
  } else {
    for (int g = 0; g < 32 / kChunkK; ++g) {
      for (int p = 0; p < NP; ++p) {
        const uint8_t* tile = w + p * panel_bytes + tk * kTileBytes;
        for (int h = 0; h < 2; ++h) {
          const uint8_t* chunk = tile + 64 + (2 * g + h) * 64;
          for (int v = 0; v < kHalfVecs; ++v) {
            const int j = (p * 2 + h) * kHalfVecs + v;
            const VU lanes = hn::LoadU(du, reinterpret_cast<const uint32_t*>(chunk) + v * kLanes);
            for (int q = 0; q < kChunkK / 2; ++q) {
              const int k = g * kChunkK + 2 * q;  // the pair (k, k + 1)
              const int bit0 = 4 * q, bit1 = bit0 + 16;
              const VF w0 = Widen4<kScaled>(lanes, bit0, hn::Set(df, unit[p][h][k]));
              const VF w1 = Widen4<kScaled>(lanes, bit1, hn::Set(df, unit[p][h][k + 1]));
              if constexpr (kScaled) {
                ChainScaled<MR, NV, NO, kPairs>(acc, odd, j, w0, w1, xs[p][h][k], xs[p][h][k + 1]);
              } else {
                Chain<MR, NV, NO, kPairs>(acc, odd, j, w0, w1, xp, tk * 32 + k);
              }
            }
          }
        }
      }
    }
  }
}

// k tile tk into Tile's chains: its blocks' units, then its codes (TileStep).
template <int MR, int NP, int B, bool kPairs, int NO>
HWY_INLINE void KTile(VF (&acc)[MR][NP * kPanelVecs], VF (&odd)[MR][NO],
                      const float* HWY_RESTRICT xp, const uint8_t* HWY_RESTRICT w,
                      int64_t panel_bytes, int64_t k_tiles, int64_t tk, bool plain,
                      float (*unit)[2][32], float (*xs)[2][32]) {
  constexpr int64_t kTileBytes = B == 7 ? 1088 : 576;
  const BlockUnits& units = BlockUnitsOf(B);
  // A few tokens' tile is bound by the read rate: fetch ahead as the one-token tile does.
  if (MR <= 2) PrefetchBfpTilesAhead(w, NP, panel_bytes, kTileBytes, tk, k_tiles);
  for (int p = 0; p < NP; ++p) {
    const uint8_t* e = w + p * panel_bytes + tk * kTileBytes;
    for (int k = 0; k < 32; ++k)
      for (int h = 0; h < 2; ++h) unit[p][h][k] = units.of[e[(k / 2) * 4 + 2 * h + k % 2]];
  }
  // One token: x(k) of this tile ([K32 / 2][1][2] and [K32][1] are both x in k order).
  if constexpr (MR == 1) {
    if (plain && ScaledTileX<NP>(xp + tk * 32, unit, xs)) {
      TileStep<MR, NP, B, kPairs, true>(acc, odd, w, panel_bytes, tk, unit, xs, xp);
      return;
    }
  }
  TileStep<MR, NP, B, kPairs, false>(acc, odd, w, panel_bytes, tk, unit, xs, xp);
}

// out[t][p * 32 + n] for t < MR, p < NP, n < 32: the tile's chains over k tiles [0, k_tiles).
// Chain j = (2 p + h) kHalfVecs + v holds, in lane l, the row 16 h + v kLanes + l: kF32 one chain
// (acc); kPairs per k tile (a 32-k block) an even-k chain (acc) and an odd-k chain (odd) from zero,
// then out += acc + odd. plain: every panel PanelIsPlain (one token then takes ScaledTileX's
// tiles).
//   xp: kPairs [K32 / 2][MR][2], else [K32][MR]; w: NP panels, panel_bytes apart.
template <int MR, int NP, int B, bool kPairs>
HWY_NOINLINE void Tile(const float* HWY_RESTRICT xp, const uint8_t* HWY_RESTRICT w,
                       int64_t panel_bytes, int64_t k_tiles, bool plain, float* HWY_RESTRICT out) {
  constexpr int NV = NP * kPanelVecs;
  const DF df;
  HWY_ALIGN float unit[NP][2][32];  // [panel][half][k] of the current tile
  HWY_ALIGN float xs[NP][2][32];    // one token: x' (ScaledTileX)
  if constexpr (kPairs) {
    for (int i = 0; i < MR * NV * kLanes; i += kLanes) hn::Store(hn::Zero(df), df, out + i);
    for (int64_t tk = 0; tk < k_tiles; ++tk) {
      // The block's chains, local to it so the compiler keeps them in registers.
      VF even[MR][NV], odd[MR][NV];
      for (int t = 0; t < MR; ++t)
        for (int j = 0; j < NV; ++j) even[t][j] = odd[t][j] = hn::Zero(df);
      KTile<MR, NP, B, kPairs>(even, odd, xp, w, panel_bytes, k_tiles, tk, plain, unit, xs);
      for (int t = 0; t < MR; ++t)
        for (int j = 0; j < NV; ++j) {
          float* o = out + t * NV * kLanes + j * kLanes;
          hn::Store(hn::Add(hn::Load(df, o), hn::Add(even[t][j], odd[t][j])), df, o);
        }
    }
  } else {
    VF acc[MR][NV], unused[MR][1];
    for (int t = 0; t < MR; ++t)
      for (int j = 0; j < NV; ++j) acc[t][j] = hn::Zero(df);
    for (int64_t tk = 0; tk < k_tiles; ++tk)
      KTile<MR, NP, B, kPairs>(acc, unused, xp, w, panel_bytes, k_tiles, tk, plain, unit, xs);
    for (int t = 0; t < MR; ++t)
      for (int j = 0; j < NV; ++j) hn::Store(acc[t][j], df, out + t * NV * kLanes + j * kLanes);
  }
}

template <int B, bool kPairs>
struct TileFn {
  int64_t panel_bytes, k_tiles;
  const gemm::BfpTask* task;  // its plain flags
  bool one_token_avx512;      // BfpTask's (false on the f32 path)
  int MaxPanels(int mr) const { return Fits<kPairs>(mr, 4) ? 4 : Fits<kPairs>(mr, 2) ? 2 : 1; }
  template <int MR>
  void Run(int np, const float* xp, const uint8_t* w, float* out) const {
    if constexpr (MR <= MaxTokens<kPairs>()) {
      const bool pl = MR == 1 && task->PanelsPlain(w, np);
      if (kPairs && pl && one_token_avx512)
        return BfpOneTokenTile(B, np, xp, w, panel_bytes, k_tiles, out);
      if constexpr (Fits<kPairs>(MR, 4)) {
        if (np == 4) return Tile<MR, 4, B, kPairs>(xp, w, panel_bytes, k_tiles, pl, out);
      }
      if constexpr (Fits<kPairs>(MR, 2)) {
        if (np == 2) return Tile<MR, 2, B, kPairs>(xp, w, panel_bytes, k_tiles, pl, out);
      }
      return Tile<MR, 1, B, kPairs>(xp, w, panel_bytes, k_tiles, pl, out);
    }
  }
  void operator()(int mr, int np, const float* xp, const uint8_t* w, float* out) const {
    gemm::WithTileHeight(mr, [&](auto height) { Run<decltype(height)::value>(np, xp, w, out); });
  }
};

// k_tiles tiles from `panel` widened into `out`: the values Tile's chains multiply, from the same
// Widen.
template <int B, WidenTo kTo>
void WidenPanelB(const uint8_t* HWY_RESTRICT panel, int64_t k_tiles, void* HWY_RESTRICT out) {
  constexpr int64_t kTileBytes = B == 7 ? 1088 : 576;
  const DF df;
  const DU du;
  auto* pairs = static_cast<uint32_t*>(out);
  auto* f32 = static_cast<float*>(out);
  // Rows [n, n + kLanes) at k, k + 1 (k even), stored whole (the rows of one vector are adjacent).
  const auto put = [&](int64_t k, VF w0, VF w1, int n) {
    if constexpr (kTo == WidenTo::kPairs) {
      const VU p = hn::Or(hn::And(hn::BitCast(du, w1), hn::Set(du, 0xffff0000u)),
                          hn::ShiftRight<16>(hn::BitCast(du, w0)));
      hn::Store(p, du, pairs + (k / 2) * 32 + n);
    } else if constexpr (kTo == WidenTo::kHalves) {
      float* even = f32 + (k / 32) * 2 * 512 + (k % 32 / 2) * 32 + n;
      hn::Store(w0, df, even);
      hn::Store(w1, df, even + 512);
    } else {
      hn::Store(w0, df, f32 + k * 32 + n);
      hn::Store(w1, df, f32 + (k + 1) * 32 + n);
    }
  };
  float unit[32][2];  // [k][half] of the current tile
  for (int64_t tk = 0; tk < k_tiles; ++tk) {
    const uint8_t* tile = panel + tk * kTileBytes;
    for (int k = 0; k < 32; ++k)
      for (int h = 0; h < 2; ++h) unit[k][h] = BlockUnit(B, tile[(k / 2) * 4 + 2 * h + k % 2]);
    if constexpr (B == 7) {
      for (int kp = 0; kp < 16; ++kp) {
        const int k = 2 * kp;
        const uint8_t* row = tile + 64 + 32 * k;
        for (int h = 0; h < 2; ++h) {
          for (int v = 0; v < kHalfVecs; ++v) {
            const int n = 16 * h + v * kLanes;
            put(tk * 32 + k, Widen8(row + n, hn::Set(df, unit[k][h])),
                Widen8(row + 32 + n, hn::Set(df, unit[k + 1][h])), n);
          }
        }
      }
    } else {
      for (int g = 0; g < 4; ++g) {
        for (int h = 0; h < 2; ++h) {
          const uint8_t* chunk = tile + 64 + (2 * g + h) * 64;
          for (int v = 0; v < kHalfVecs; ++v) {
            const VU lanes = hn::LoadU(du, reinterpret_cast<const uint32_t*>(chunk) + v * kLanes);
            for (int q = 0; q < 4; ++q) {
              const int k = g * 8 + 2 * q;  // the pair (k, k + 1)
              put(tk * 32 + k, Widen4(lanes, 4 * q, hn::Set(df, unit[k][h])),
                  Widen4(lanes, 4 * q + 16, hn::Set(df, unit[k + 1][h])), 16 * h + v * kLanes);
            }
          }
        }
      }
    }
  }
}

// The portable WidenPanelB (`to`: WidenTo), pairs and halves under FTZ (the pairs tile's flush of
// a bf16 subnormal).
void WidenPanel(int magnitude_bits, int to, const uint8_t* panel, int64_t k_tiles, void* out) {
#if HWY_ARCH_X86
  const unsigned int csr = _mm_getcsr();
  if (to != static_cast<int>(WidenTo::kF32)) _mm_setcsr(csr | 0x8000u);
#endif
  const auto run = [&](auto b) {
    constexpr int B = decltype(b)::value;
    switch (static_cast<WidenTo>(to)) {
      case WidenTo::kPairs:
        return WidenPanelB<B, WidenTo::kPairs>(panel, k_tiles, out);
      case WidenTo::kF32:
        return WidenPanelB<B, WidenTo::kF32>(panel, k_tiles, out);
      case WidenTo::kHalves:
        return WidenPanelB<B, WidenTo::kHalves>(panel, k_tiles, out);
    }
  };
  if (magnitude_bits == 7) {
    run(std::integral_constant<int, 7>());
  } else {
    run(std::integral_constant<int, 3>());
  }
#if HWY_ARCH_X86
  _mm_setcsr(csr);
#endif
}

int BfpMaxTileTokens(int path) {
  return path == kBfpPathPairs ? MaxTokens<true>() : MaxTokens<false>();
}

template <int B>
void RunB(int path, const gemm::BfpTask& task, int64_t pa, int64_t pb) {
  const gemm::Task& t = task.base;
  if (path == kBfpPathF32) {
    gemm::RunPanels(t, pa, pb, TileFn<B, false>{t.panel_bytes, t.k_steps, &task, false});
    return;
  }
#if WC_BFP_ROW_GROUP_TARGET
  WC_CHECK(false, "the pairs path runs the row-group tiles on this target");
#else
#if HWY_ARCH_X86
  const unsigned int csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8000u);  // FTZ, as the BF16 GEMM's pairs kernel
#endif
  gemm::RunPanels(t, pa, pb,
                  TileFn<B, true>{t.panel_bytes, t.k_steps, &task, task.one_token_avx512});
#if HWY_ARCH_X86
  _mm_setcsr(csr);
#endif
#endif
}

// The thread's panels [pa, pb) on the portable tiles.
void BfpRunRange(int path, const gemm::BfpTask& task, int64_t pa, int64_t pb) {
  if (task.magnitude_bits == 7) return RunB<7>(path, task, pa, pb);
  return RunB<3>(path, task, pa, pb);
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(BfpMaxTileTokens);
HWY_EXPORT(BfpRunRange);
HWY_EXPORT(WidenPanel);

namespace {

WeightFormat FormatOfBfp(const BfpPanels& w) {
  return w.format() == BfpFormat::kBfp4 ? WeightFormat::kBfp4 : WeightFormat::kBfp8;
}

// The format table's kernel for a call of w with n_tokens (format_table.h's bfp rules).
GemmKernel KernelOf(const BfpPanels& w, int64_t n_tokens) {
  return ChooseGemmKernel(FormatOfBfp(w), w.precision(), n_tokens).kernel;
}

// The further form of the codes the int8 kernel for a call of w with n_tokens reads: the AVX2
// kernel's quartered bfp4 tiles unsigned_codes, its 8-token bfp8 tiles codes_by8; many tokens
// only (one token multiplies the signed codes).
BfpInt8Codes ExtraCodes(const BfpPanels& w, int64_t n_tokens) {
  if (n_tokens <= 1 || KernelOf(w, n_tokens) != GemmKernel::kBfpInt8Avx2)
    return BfpInt8Codes::kPlain;
  if (w.format() == BfpFormat::kBfp4) return BfpInt8Codes::kUnsigned;
  // bfp8's 8-token tiles: every call of a whole group of 8 tokens or more (int7's as x + 64).
  return n_tokens >= 8 ? BfpInt8Codes::kBy8 : BfpInt8Codes::kPlain;
}

int PathOf(const BfpPanels& w) {
  return w.precision() == ActivationPrecision::kF32 ? kBfpPathF32 : kBfpPathPairs;
}

bool IsAmx(GemmKernel k) {
  return k == GemmKernel::kBfpAmxFused || k == GemmKernel::kBfpAmxWidened;
}
bool WidensOnce(GemmKernel k) {
  return k == GemmKernel::kBfpAmxWidened || k == GemmKernel::kBfpWidened ||
         k == GemmKernel::kBfpF32Widened || k == GemmKernel::kBfpDotWidened;
}
bool WidensOnceOrAmx(GemmKernel k) {
  return WidensOnce(k) || IsAmx(k);
}

// Panels [pa, pb) widened once each (BfpWidenOnceTokens) into this thread's buffer, then the
// BF16 / F32 GEMM's tiles over every token tile.
//   pairs without AMX: each panel chunk by chunk into f32 halves (gemm_schedule.h's RunHalves),
//     every token tile run on a chunk before the next is widened, so the widened weights stay in
//     L2 and no tile splits a pair;
//   else: the whole panel as the BF16 (F32) GEMM's packed panel, that GEMM's range run on it with
//     the buffer's task: panel 0, the row range and bias shifted by the panel's first row, and the
//     GEMM's chain length (padded_cols / 2 pairs, K padded to 32; F32: cols).
//   amx: the input on AMX (kBfpPathPairs where the BF16 GEMM runs there), else nullptr; dot: the
//   whole panel for the vdpbf16ps tiles (gemm_bf16_dot.h; task.base.xp in their layout).
void RunWidened(int path, const gemm::BfpTask& task, const AmxGemmInput* amx, bool dot, int64_t pa,
                int64_t pb) {
  const gemm::Task& b = task.base;
  const int64_t k_tiles = b.k_steps;
  if (path == kBfpPathPairs && amx == nullptr && !dot) {
    const int64_t tile_bytes = b.panel_bytes / k_tiles;
    gemm::RunHalves(b, k_tiles * 16, pa, pb, [&](int64_t p, int64_t kp, int64_t n, float* halves) {
      HWY_DYNAMIC_DISPATCH(WidenPanel)
      (task.magnitude_bits, static_cast<int>(WidenTo::kHalves),
       b.w + p * b.panel_bytes + kp / 16 * tile_bytes, n / 16, halves);
    });
    return;
  }
  const int64_t k32 = k_tiles * 32;
  const int64_t panel_bytes = path == kBfpPathF32 ? k32 * 32 * 4 : k32 * 32 * 2;
  auto* buffer = static_cast<uint8_t*>(
      gemm::ThreadBuffer<gemm::kWidenedPanelSlot>(static_cast<size_t>(panel_bytes)));
  gemm::Task t = b;
  t.w = buffer;
  t.panel_bytes = panel_bytes;
  t.k_steps = path == kBfpPathF32 ? k32 - 32 + task.last_cols : k32 / 2;
  for (int64_t p = pa; p < pb; ++p) {
    const uint8_t* panel = b.w + p * b.panel_bytes;
    HWY_DYNAMIC_DISPATCH(WidenPanel)
    (task.magnitude_bits, static_cast<int>(path == kBfpPathPairs ? WidenTo::kPairs : WidenTo::kF32),
     panel, k_tiles, buffer);
    const int64_t first = p * gemm::kPanelRows;
    t.row_begin = b.row_begin - first;
    t.row_end = b.row_end - first;
    t.bias = b.bias != nullptr ? b.bias + first : nullptr;
    if (amx != nullptr) {
      GemmAmxRange(*amx, t, 0, 1);
    } else if (dot) {
      GemmBf16DotRange(t, 0, 1);
    } else {
      gemm::PortableRange(path == kBfpPathPairs, t, 0, 1);
    }
  }
}

// Packs one tile of mr tokens of x into dst (gemm_bfp.h's BfpGemmInput layouts).
void PackTile(int path, const float* x, int64_t x_stride, int64_t cols, int64_t k32, int mr,
              float* dst) {
  for (int t = 0; t < mr; ++t) {
    const float* xt = x + t * x_stride;
    switch (path) {
      case kBfpPathF32:
        for (int64_t k = 0; k < k32; ++k) dst[k * mr + t] = k < cols ? xt[k] : 0.0f;
        break;
      case kBfpPathPairs:
        for (int64_t k = 0; k < k32; ++k)
          dst[((k / 2) * mr + t) * 2 + k % 2] =
              k < cols ? BF16ToF32(ActivationToBF16(xt[k])) : 0.0f;
        break;
    }
  }
}

}  // namespace

int GemmBfpTileTokens(const BfpPanels& w, int64_t n_tokens) {
  switch (KernelOf(w, n_tokens)) {
    case GemmKernel::kBfpAmxFused:
    case GemmKernel::kBfpAmxWidened:
      return AmxGemmInput::kTileTokens;
    case GemmKernel::kBfpDotWidened:
      return kBf16DotTileTokens;
    case GemmKernel::kBfpWidened:
    case GemmKernel::kBfpF32Widened:
      return gemm::PortableTileTokens(PathOf(w) == kBfpPathPairs);
    case GemmKernel::kBfpRowGroups:
      return kBfpRowGroupMaxTokens;
    case GemmKernel::kBfpInt8Vnni:
    case GemmKernel::kBfpInt8Avx2:
    case GemmKernel::kBfpInt8:
      return 8;  // the VNNI loop's token tile
    default:
      return HWY_DYNAMIC_DISPATCH(BfpMaxTileTokens)(PathOf(w));
  }
}

BfpGemmInput PackBfpGemmInput(const float* x, int64_t n_tokens, int64_t x_stride,
                              const BfpPanels& w) {
  WC_CHECK(n_tokens >= 0 && x_stride >= w.cols(), "bad gemm input shape");
  BfpGemmInput in;
  in.path_ = PathOf(w);
  const GemmKernel kernel = KernelOf(w, n_tokens);
  const bool amx = IsAmx(kernel);
  in.widen_once_ = WidensOnce(kernel);
  in.n_tokens_ = n_tokens;
  in.panels_ = &w;
  if (IsInt8Codes(w.precision())) {
    in.int8_ = std::make_shared<const QuantInput>(
        QuantizeBfpInt8Input(x, n_tokens, x_stride, w.cols(), ActivationCodeMax(w.precision()),
                             ExtraCodes(w, n_tokens)));
    return in;
  }
  const int64_t k32 = w.k_tiles() * 32;
  if (amx) {
    in.amx_ = std::make_shared<const AmxGemmInput>(
        PackAmxGemmInput(x, n_tokens, x_stride, w.cols(), k32));
    return in;
  }
  in.row_groups_ = kernel == GemmKernel::kBfpRowGroups;
  in.dot_ = kernel == GemmKernel::kBfpDotWidened;
  in.tile_tokens_ = GemmBfpTileTokens(w, n_tokens);
  in.floats_per_token_ = in.dot_ ? k32 / 2 : k32;  // the vdpbf16ps tiles: two bf16 a float
  in.data_.resize(static_cast<size_t>(std::max<int64_t>(1, n_tokens * in.floats_per_token_)));
  const gemm::TokenTiles tiles(n_tokens, in.tile_tokens_);
  const bool parallel = !omp_in_parallel() && tiles.n_tiles > 1 && n_tokens * w.cols() >= (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < tiles.n_tiles; ++i) {
    const int64_t t0 = tiles.Begin(i);
    float* dst = in.data_.data() + t0 * in.floats_per_token_;
    if (in.dot_)
      PackBf16DotTile(x + t0 * x_stride, x_stride, w.cols(), k32, tiles.Height(i), dst);
    else
      PackTile(in.path_, x + t0 * x_stride, x_stride, w.cols(), k32, tiles.Height(i), dst);
  }
  return in;
}

void GemmBfp(const BfpGemmInput& x, const BfpPanels& w, const float* bias, float* y,
             int64_t y_stride, int64_t row_begin, int64_t row_end) {
  WC_CHECK(row_begin >= 0 && row_end <= w.rows() && row_begin <= row_end, "bad row range");
  WC_CHECK(x.panels_ == &w, "gemm input packed for another matrix");
  if (x.n_tokens_ == 0 || row_begin == row_end || w.cols() == 0) {
    for (int64_t t = 0; t < x.n_tokens_; ++t)
      for (int64_t r = row_begin; r < row_end; ++r)
        y[t * y_stride + r - row_begin] = bias != nullptr ? 0.0f + bias[r] : 0.0f;
    return;
  }
  const int64_t pa = row_begin / gemm::kPanelRows;
  const int64_t pb = (row_end + gemm::kPanelRows - 1) / gemm::kPanelRows;
  if (x.int8_ != nullptr) {
    const GemmKernel kernel = KernelOf(w, x.n_tokens_);
    const BfpInt8Codes extra = ExtraCodes(w, x.n_tokens_);
    WC_CHECK((extra != BfpInt8Codes::kUnsigned ||
              x.int8_->unsigned_codes.size() == x.int8_->codes.size()) &&
                 (extra != BfpInt8Codes::kBy8 ||
                  x.int8_->codes_by8.size() ==
                      static_cast<size_t>(x.n_tokens_ / 8 * 8 * x.int8_->cols)) &&
                 x.int8_->code_max == ActivationCodeMax(w.precision()),
             "gemm input packed for another matrix");
    gemm::ForThreadPanels(pa, pb, [&](int64_t a, int64_t c) {
      const IeeeSubnormals ieee;
      if (kernel == GemmKernel::kBfpInt8Vnni)
        x86::BfpInt8Vnni(*x.int8_, w, bias, y, y_stride, row_begin, row_end, a, c);
      else if (kernel == GemmKernel::kBfpInt8Avx2)
        x86::BfpInt8Avx2(*x.int8_, w, bias, y, y_stride, row_begin, row_end, a, c);
      else
        BfpInt8PortableRange(*x.int8_, w, bias, y, y_stride, row_begin, row_end, a, c);
    });
    return;
  }
  gemm::BfpTask task;
  gemm::Task& b = task.base;
  b.xp = x.data_.data();
  b.floats_per_token = x.floats_per_token_;
  b.tile_tokens = x.tile_tokens_;
  b.n_tokens = x.n_tokens_;
  b.w = w.data();
  b.panel_bytes = w.panel_bytes();
  b.k_steps = w.k_tiles();
  b.bias = bias;
  b.y = y;
  b.y_stride = y_stride;
  b.row_begin = row_begin;
  b.row_end = row_end;
  task.magnitude_bits = BfpMagnitudeBits(w.format());
  task.last_cols = w.cols() - (w.k_tiles() - 1) * 32;
  task.plain = w.plain_flags();
  task.one_token_avx512 = KernelsOn(CpuKernels::kAvx512Gemm);
  task.one_token_avx2 = KernelsOn(CpuKernels::kAvx2Gemm);
  const int path = x.path_;
  const AmxGemmInput* amx = x.amx_.get();
  if (amx != nullptr && !x.widen_once_) {  // AMX, a k tile widened at a time
    gemm::ForThreadPanels(pa, pb, [&](int64_t a, int64_t c) { GemmBfpAmxRange(*amx, task, a, c); });
    return;
  }
  if (x.widen_once_) {
    gemm::ForThreadPanels(pa, pb,
                          [&](int64_t a, int64_t c) { RunWidened(path, task, amx, x.dot_, a, c); });
    return;
  }
  if (x.row_groups_) {
    gemm::ForThreadPanels(pa, pb, [&](int64_t a, int64_t c) { BfpRowGroupsRange(task, a, c); });
    return;
  }
  gemm::ForThreadPanels(pa, pb, [&](int64_t a, int64_t c) {
    HWY_DYNAMIC_DISPATCH(BfpRunRange)(path, task, a, c);
  });
}

void GemmBfp(const float* x, int64_t n_tokens, const BfpPanels& w, const float* bias, float* y) {
  const BfpGemmInput in = PackBfpGemmInput(x, n_tokens, w.cols(), w);
  GemmBfp(in, w, bias, y, w.rows(), 0, w.rows());
}

int64_t BfpWidenOnceTokens(const BfpPanels& w) {
  return FirstTokensRunning(FormatOfBfp(w), w.precision(), WidensOnceOrAmx);
}

bool GemmBfpUsesAmx(const BfpPanels& w, int64_t n_tokens) {
  return IsAmx(KernelOf(w, n_tokens));
}

std::string GemmBfpKernelName(const BfpPanels& w) {
  return std::string(BfpFormatName(w.format())) + ": " +
         GemmKernelsByTokens(FormatOfBfp(w), w.precision());
}

}  // namespace wc
#endif  // HWY_ONCE
