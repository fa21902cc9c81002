// The block-float GEMM's row-group tiles (gemm_bfp_row_groups.h): Highway, the targets
// WC_BFP_ROW_GROUP_TARGET names; the others report themselves off and never run them.
#include "kernels/gemm/bfp/gemm_bfp_row_groups.h"

#include <cstdint>

#include "kernels/gemm/bfp/gemm_bfp_one_token.h"
#include "util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm/bfp/gemm_bfp_row_groups.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/gemm/bfp/bfp_widen-inl.h"
#include "kernels/gemm/exact_fma-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;
using bfp::DF;
using bfp::DU;
using bfp::VF;
using bfp::VU;

constexpr int kLanes = static_cast<int>(hn::MaxLanes(DF()));
#if WC_BFP_ROW_GROUP_TARGET
constexpr int kGroupVecs = 2;  // vectors of rows a group's chains hold per token
constexpr int kGroupRows = kGroupVecs * kLanes;

// k = 2 kp + kOdd into the chains: one FMA per token and vector of the widened codes w.
//   xk: the k tile's activations [16][MR][2] (k pair, token, k parity).
template <int MR, int kOdd>
HWY_INLINE void GroupStep(VF (&acc)[MR][kGroupVecs], const float* HWY_RESTRICT xk, int kp,
                          const VF (&w)[kGroupVecs]) {
  const DF df;
  for (int t = 0; t < MR; ++t) {
    const VF x = hn::Set(df, xk[(kp * MR + t) * 2 + kOdd]);
    for (int v = 0; v < kGroupVecs; ++v) acc[t][v] = ExactFma(x, w[v], acc[t][v]);
  }
}

// One chain set of a half's group of rows [n0, n0 + kGroupRows): the k's of parity kOdd of one k
// tile into acc, from zero, k increasing (the pairs kernel's even-k or odd-k chain).
//   tile: the k tile's bytes (gemm_bfp.h); xk: its activations; bases: its [64] block bases
//   (bfp::TileBases, exponent byte order).
template <int MR, int B, int kOdd>
HWY_INLINE void GroupChains(VF (&acc)[MR][kGroupVecs], const uint8_t* HWY_RESTRICT tile,
                            const float* HWY_RESTRICT xk, const float* HWY_RESTRICT bases, int n0) {
  const DF df;
  const DU du;
  const int h = n0 / 16;
  for (int t = 0; t < MR; ++t)
    for (int v = 0; v < kGroupVecs; ++v) acc[t][v] = hn::Zero(df);
  if constexpr (B == 7) {
    for (int kp = 0; kp < 16; ++kp) {
      const uint8_t* row = tile + 64 + 32 * (2 * kp + kOdd) + n0;  // row k's 32 codes
      const VF base = hn::Set(df, bases[4 * kp + 2 * h + kOdd]);
      VF w[kGroupVecs];
      for (int v = 0; v < kGroupVecs; ++v) w[v] = bfp::Widen8ByBase(row + v * kLanes, base);
      GroupStep<MR, kOdd>(acc, xk, kp, w);
    }
  } else {
    for (int g = 0; g < 4; ++g) {  // 64-byte chunk 2 g + h: k in [8 g, 8 g + 8), 16 rows
      const auto* chunk = reinterpret_cast<const uint32_t*>(tile + 64 + (2 * g + h) * 64);
      VU lanes[kGroupVecs];
      for (int v = 0; v < kGroupVecs; ++v) lanes[v] = hn::LoadU(du, chunk + n0 % 16 + v * kLanes);
      for (int q = 0; q < 4; ++q) {
        const int kp = 4 * g + q;
        const VF base = hn::Set(df, bases[4 * kp + 2 * h + kOdd]);
        VF w[kGroupVecs];
        for (int v = 0; v < kGroupVecs; ++v)
          w[v] = bfp::Widen4ByBase(lanes[v], 4 * q + 16 * kOdd, base);
        GroupStep<MR, kOdd>(acc, xk, kp, w);
      }
    }
  }
}

// out[t][n] for t < MR, n < 32: one panel's chains over its k tiles (gemm_bfp_row_groups.h).
//   xp: [K32 / 2][MR][2]; panel: its k_tiles tiles; out: [MR][32].
template <int MR, int B>
HWY_NOINLINE void GroupTile(const float* HWY_RESTRICT xp, const uint8_t* HWY_RESTRICT panel,
                            int64_t panel_bytes, int64_t k_tiles, float* HWY_RESTRICT out) {
  static_assert(16 % kGroupRows == 0, "a group lies within one half");
  constexpr int64_t kTileBytes = B == 7 ? 1088 : 576;
  const DF df;
  for (int i = 0; i < MR * 32; i += kLanes) hn::Store(hn::Zero(df), df, out + i);
  HWY_ALIGN float bases[64];                     // the current tile's (bfp::TileBases)
  HWY_ALIGN float even[MR][kGroupVecs][kLanes];  // a group's even-k chains while its odd ones run
  for (int64_t tk = 0; tk < k_tiles; ++tk) {
    PrefetchBfpTilesAhead(panel, 1, panel_bytes, kTileBytes, tk, k_tiles);
    const uint8_t* tile = panel + tk * kTileBytes;
    bfp::TileBases<B>(tile, bases);
    const float* xk = xp + tk * 16 * MR * 2;
    for (int n0 = 0; n0 < 32; n0 += kGroupRows) {
      VF acc[MR][kGroupVecs];
      GroupChains<MR, B, 0>(acc, tile, xk, bases, n0);
      for (int t = 0; t < MR; ++t)
        for (int v = 0; v < kGroupVecs; ++v) hn::Store(acc[t][v], df, even[t][v]);
      GroupChains<MR, B, 1>(acc, tile, xk, bases, n0);
      for (int t = 0; t < MR; ++t)
        for (int v = 0; v < kGroupVecs; ++v) {
          float* o = out + t * 32 + n0 + v * kLanes;
          hn::Store(hn::Add(hn::Load(df, o), hn::Add(hn::Load(df, even[t][v]), acc[t][v])), df, o);
        }
    }
  }
}

// gemm::RunPanels' tile: one panel a call, any height up to kBfpRowGroupMaxTokens; one token on a
// plain panel takes the AVX2 one-token tile on the AVX2 target (gemm_bfp_one_token.h): with the
// block's unit on the activation, its widening is two or three operations a code where the row
// groups' (for every token of a tile alike) is four.
template <int B>
struct GroupTileFn {
  int64_t panel_bytes, k_tiles;
  const gemm::BfpTask* task;  // its plain flags and one_token_avx2
  int MaxPanels(int /*mr*/) const { return 1; }
  void operator()(int mr, int /*np: 1*/, const float* xp, const uint8_t* w, float* out) const {
#if HWY_TARGET == HWY_AVX2
    if (mr == 1 && task->one_token_avx2 && task->PanelsPlain(w, 1))
      return BfpOneTokenTileAvx2(B, xp, w, panel_bytes, k_tiles, out);
#endif
    gemm::WithTileHeight(mr, [&](auto height) {
      constexpr int MR = decltype(height)::value;
      if constexpr (MR <= kBfpRowGroupMaxTokens) GroupTile<MR, B>(xp, w, panel_bytes, k_tiles, out);
    });
  }
};

#endif  // WC_BFP_ROW_GROUP_TARGET

}  // namespace

bool RowGroupsOnTarget() {
  return WC_BFP_ROW_GROUP_TARGET;
}

void RowGroupsRange(const gemm::BfpTask& task, int64_t pa, int64_t pb) {
#if WC_BFP_ROW_GROUP_TARGET
  const gemm::Task& t = task.base;
#if HWY_ARCH_X86
  const unsigned int csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8000u);  // FTZ, as the BF16 GEMM's pairs kernel
#endif
  if (task.magnitude_bits == 7) {
    gemm::RunPanels(t, pa, pb, GroupTileFn<7>{t.panel_bytes, t.k_steps, &task});
  } else {
    gemm::RunPanels(t, pa, pb, GroupTileFn<3>{t.panel_bytes, t.k_steps, &task});
  }
#if HWY_ARCH_X86
  _mm_setcsr(csr);
#endif
#else
  (void)task, (void)pa, (void)pb;
  WC_CHECK(false, "block-float row-group tiles on a target that does not run them");
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(RowGroupsOnTarget);
HWY_EXPORT(RowGroupsRange);

bool BfpRowGroupsOn() {
  return HWY_DYNAMIC_DISPATCH(RowGroupsOnTarget)();
}

void BfpRowGroupsRange(const gemm::BfpTask& task, int64_t pa, int64_t pb) {
  HWY_DYNAMIC_DISPATCH(RowGroupsRange)(task, pa, pb);
}

}  // namespace wc
#endif  // HWY_ONCE
