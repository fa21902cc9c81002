#include "kernels/gemm/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm/bf16/gemm_amx.h"
#include "kernels/gemm/bf16/gemm_bf16_dot.h"
#include "kernels/gemm/format_table.h"
#include "kernels/gemm/gemm_schedule.h"
#include "util/bf16.h"
#include "util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm/gemm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/gemm/exact_fma-inl.h"

// The kernels a packed input is laid out for (GemmInput::path_).
#ifndef WC_KERNELS_GEMM_PATHS_
#define WC_KERNELS_GEMM_PATHS_
namespace wc {
enum GemmPath : int {
  kPathF32 = 0,
  kPathF16 = 1,
  kPathPairs = 2,
  kPathBfp = 4,
  kPathAmx = 5,
  kPathQuant = 6,    // GGML-quantized weights: the integer GEMM (quant_gemm.h)
  kPathBf16Dot = 7,  // BF16 panels on vdpbf16ps (gemm_bf16_dot.h)
  kPathInt16 = 8,    // BF16 panels as int16 codes (bf16_int16.h)
};
}  // namespace wc
#endif

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr int kLanes = static_cast<int>(hn::MaxLanes(DF()));
constexpr int kPanelVecs = gemm::kPanelRows / kLanes;  // vectors across one panel's 32 rows
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// Pairs: the even and odd chains of a block live together (x2 registers), or, with 16 registers,
// one after the other (kSplitPasses: the block's weights are read twice, from L1).
constexpr int kAccBudget = 24, kPairAccBudget = 12;  // of 32 vector registers (pairs: x2)
constexpr bool kSplitPasses = false;
#else
// Pairs: one pass at a time; up to 3 tokens over the whole panel (3 x 4 vectors), 4-6 tokens over
// its rows in row groups of 2 vectors (16 rows on AVX2; 6 x 2 vectors): a 9-token verify step
// runs 2 token tiles (5 + 4), not 3 of 3 tokens, and each weight's split serves more tokens.
constexpr int kAccBudget = 12, kPairAccBudget = 12;  // of 16
constexpr bool kSplitPasses = true;
#endif

// The weight kinds: how one k step's vector j of a panel row is loaded and multiplied in.
//   F32 / F16: panel[k][32]; one FMA per step.  Pairs: panel[k/2][32][2], x packed [k/2][MR][2];
//   two FMAs per step, k into the block's even chain and k + 1 into its odd one (gemm.h's order;
//   k_steps a multiple of 16).
//   kMinGroupVecs: the fewest of a panel's vectors a tile may run at a time (a row group; a
//   whole panel when it equals kPanelVecs).
struct KindF32 {
  static constexpr int kBudget = kAccBudget, kMinGroupVecs = kPanelVecs;
  static constexpr int64_t kStepBytes = gemm::kPanelRows * 4;
};
struct KindF16 {
  static constexpr int kBudget = kAccBudget, kMinGroupVecs = kPanelVecs;
  static constexpr int64_t kStepBytes = gemm::kPanelRows * 2;
};
struct KindPairs {
  static constexpr int kBudget = kPairAccBudget;
  static constexpr int kMinGroupVecs = kSplitPasses ? std::min(2, kPanelVecs) : kPanelVecs;
  static constexpr int64_t kStepBytes = gemm::kPanelRows * 4;
};

// The vectors of a panel an mr-token tile runs at a time: the whole panel when its chains fit the
// budget, else row groups of half, a quarter, ... (at least kMinGroupVecs). A tile of few tokens
// keeps the whole panel, so it still has enough independent chains to cover the FMA latency.
template <class Kind>
constexpr int GroupVecs(int mr) {
  int g = kPanelVecs;
  while (g > Kind::kMinGroupVecs && mr * g > Kind::kBudget) g /= 2;
  return g;
}
template <class Kind>
constexpr int MaxTokens() {
  return std::max(1, std::min(gemm::kMaxTileTokens, Kind::kBudget / Kind::kMinGroupVecs));
}
// A tile of row groups runs one panel.
template <class Kind>
constexpr bool Fits(int mr, int np) {
  return mr <= MaxTokens<Kind>() &&
         (np == 1 || (GroupVecs<Kind>(mr) == kPanelVecs && mr * np * kPanelVecs <= Kind::kBudget));
}

// a * b + c rounded once on every target (exact_fma-inl.h).
HWY_INLINE VF Fma(VF a, VF b, VF c) {
  return ExactFma(a, b, c);
}

HWY_INLINE VF LoadF16(DF df, const uint8_t* p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::Load(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}

// Fetches 16 k steps ahead in each of NP panels every 4 steps: one or two tokens are bound by the
// read rate, as the block-float tiles are (gemm_bfp_one_token.h).
template <int MR, int NP, class Kind>
HWY_INLINE void PrefetchAhead(const uint8_t* const (&wp)[NP], int64_t k, int64_t k_steps) {
  if (MR <= 2 && k % 4 == 0 && k + 20 <= k_steps) {
    for (int p = 0; p < NP; ++p)
      for (int l = 0; l < 4 * Kind::kStepBytes; l += 64)
        __builtin_prefetch(wp[p] + (k + 16) * Kind::kStepBytes + l, 0, 3);
  }
}

// out[t][j * kLanes + lane] for t < MR, j < NP * kPanelVecs: the tile's chains over all k steps
// (F32 / F16).
//   xp: the tile's packed input; w: the first of NP consecutive panels, panel_bytes apart.
template <int MR, int NP, class Kind>
HWY_NOINLINE void Tile(const float* HWY_RESTRICT xp, const uint8_t* HWY_RESTRICT w,
                       int64_t panel_bytes, int64_t k_steps, float* HWY_RESTRICT out) {
  constexpr int NV = NP * kPanelVecs;
  const DF df;
  VF acc[MR][NV];
  for (int t = 0; t < MR; ++t)
    for (int j = 0; j < NV; ++j) acc[t][j] = hn::Zero(df);
  const uint8_t* wp[NP];
  for (int p = 0; p < NP; ++p) wp[p] = w + p * panel_bytes;
  for (int64_t k = 0; k < k_steps; ++k) {
    PrefetchAhead<MR, NP, Kind>(wp, k, k_steps);
    for (int j = 0; j < NV; ++j) {
      const uint8_t* src = wp[j / kPanelVecs] + k * Kind::kStepBytes;
      VF wv;
      if constexpr (std::is_same_v<Kind, KindF32>) {
        wv = hn::Load(df, reinterpret_cast<const float*>(src) + (j % kPanelVecs) * kLanes);
      } else {
        wv = LoadF16(df, src + (j % kPanelVecs) * kLanes * 2);
      }
      for (int t = 0; t < MR; ++t) acc[t][j] = Fma(hn::Set(df, xp[k * MR + t]), wv, acc[t][j]);
    }
  }
  for (int t = 0; t < MR; ++t)
    for (int j = 0; j < NV; ++j) hn::Store(acc[t][j], df, out + t * NV * kLanes + j * kLanes);
}

// Where the pairs tile reads a block's weights: BF16 panels (bf16(k + 1) << 16 | bf16(k) per row,
// split in registers) or one panel's f32 halves (HalvesChunk: per block [2][16][32], even k then
// odd k, no split).
enum class PairsSource { kPanels, kHalves };

// The pairs tile (BF16 panels, gemm.h's order): per 32-k block (16 k steps) the even-k chains
// `even` and odd-k chains `odd` from zero, then out += even + odd (out: the chains across blocks,
// as Tile's; zeroed first unless `accumulate`, which continues a call on the previous k steps).
// Chains live inside the block's loop so the compiler keeps them in registers. With 16 registers
// (kSplitPasses) the even pass is kept in memory while the odd pass runs, and both run a row group
// (all NP panels when their chains fit, else GroupVecs<KindPairs>(MR) vectors) at a time; each
// element's operations are the same.
template <int MR, int NP, PairsSource kSource = PairsSource::kPanels>
HWY_NOINLINE void TilePairs(const float* HWY_RESTRICT xp, const uint8_t* HWY_RESTRICT w,
                            int64_t panel_bytes, int64_t k_steps, float* HWY_RESTRICT out,
                            bool accumulate = false) {
  constexpr int NV = NP * kPanelVecs;
  constexpr bool kHalves = kSource == PairsSource::kHalves;
  static_assert(!kHalves || NP == 1, "halves hold one panel");
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  if (!accumulate)
    for (int i = 0; i < MR * NV * kLanes; i += kLanes) hn::Store(hn::Zero(df), df, out + i);
  const uint8_t* wp[NP];
  for (int p = 0; p < NP; ++p) wp[p] = w + p * panel_bytes;
  // The weights of pass `pass` (0 even, 1 odd), k step k, vector j.
  const auto load_half = [&](int pass, int64_t b, int64_t k, int j) {
    const float* h = reinterpret_cast<const float*>(w) + (b / 16 * 2 + pass) * 16 * 32;
    return hn::Load(df, h + (k - b) * 32 + j * kLanes);
  };
  for (int64_t b = 0; b < k_steps; b += 16) {
    if constexpr (kSplitPasses) {
      // Per row group: the even pass, kept in `even`, then the odd pass; out += even + odd.
      constexpr int G = NP > 1 ? NV : GroupVecs<KindPairs>(MR);  // NP > 1: Fits, whole panels
      static_assert(NV % G == 0, "a panel holds whole row groups");
      HWY_ALIGN float even[MR * G * kLanes];  // [MR][G * kLanes]
      VF chain[MR][G];
      for (int g = 0; g < NV; g += G) {
#pragma GCC unroll 2
        for (int pass = 0; pass < 2; ++pass) {
          for (int t = 0; t < MR; ++t)
            for (int j = 0; j < G; ++j) chain[t][j] = hn::Zero(df);
          for (int64_t k = b; k < b + 16; ++k) {
            if (!kHalves && pass == 0 && g == 0) PrefetchAhead<MR, NP, KindPairs>(wp, k, k_steps);
            // Registers (16): MR * G chains, and either the group's G weights with one broadcast
            // at a time (G <= MR: 12 + 2 + 1 at six tokens) or the MR broadcasts with one weight
            // at a time (3 tokens x 4 vectors: 12 + 3 + 1). Holding both spills chains to the
            // stack, and a chain through memory runs at a fraction of the FMA rate.
            const auto weights = [&](int j) {
              if constexpr (kHalves) {
                return load_half(pass, b, k, g + j);
              } else {
                const uint8_t* src = wp[(g + j) / kPanelVecs] + k * KindPairs::kStepBytes;
                const auto pair = hn::Load(
                    du, reinterpret_cast<const uint32_t*>(src) + ((g + j) % kPanelVecs) * kLanes);
                // The odd half by two shifts, not a mask: no register held for its constant.
                return pass == 0 ? hn::BitCast(df, hn::ShiftLeft<16>(pair))
                                 : hn::BitCast(df, hn::ShiftLeft<16>(hn::ShiftRight<16>(pair)));
              }
            };
            const auto x_at = [&](int t) { return hn::Set(df, xp[(k * MR + t) * 2 + pass]); };
            if constexpr (G <= MR) {
              VF wv[G];
              for (int j = 0; j < G; ++j) wv[j] = weights(j);
              for (int t = 0; t < MR; ++t) {
                const VF xv = x_at(t);
                for (int j = 0; j < G; ++j) chain[t][j] = Fma(xv, wv[j], chain[t][j]);
              }
            } else {
              VF xv[MR];
              for (int t = 0; t < MR; ++t) xv[t] = x_at(t);
              for (int j = 0; j < G; ++j) {
                const VF wv = weights(j);
                for (int t = 0; t < MR; ++t) chain[t][j] = Fma(xv[t], wv, chain[t][j]);
              }
            }
          }
          for (int t = 0; t < MR; ++t)
            for (int j = 0; j < G; ++j) {
              const int e = (t * G + j) * kLanes;
              float* o = out + t * NV * kLanes + (g + j) * kLanes;
              if (pass == 0) {
                hn::Store(chain[t][j], df, even + e);
              } else {
                hn::Store(hn::Add(hn::Load(df, o), hn::Add(hn::Load(df, even + e), chain[t][j])),
                          df, o);
              }
            }
        }
      }
      continue;
    }
    VF even[MR][NV], odd[MR][NV];
    for (int t = 0; t < MR; ++t)
      for (int j = 0; j < NV; ++j) even[t][j] = odd[t][j] = hn::Zero(df);
    for (int64_t k = b; k < b + 16; ++k) {
      if (!kHalves) PrefetchAhead<MR, NP, KindPairs>(wp, k, k_steps);
      // Registers (32) as in the split passes: the weights first and one token's two broadcasts
      // at a time (NV <= MR: 24 chains + 4 + 2 at six tokens), or the tokens' broadcasts first
      // and one vector's weights at a time.
      const auto weights = [&](int j, VF& w_even, VF& w_odd) {
        if constexpr (kHalves) {
          w_even = load_half(0, b, k, j);
          w_odd = load_half(1, b, k, j);
        } else {
          const uint8_t* src = wp[j / kPanelVecs] + k * KindPairs::kStepBytes;
          const auto pair =
              hn::Load(du, reinterpret_cast<const uint32_t*>(src) + (j % kPanelVecs) * kLanes);
          w_odd = hn::BitCast(df, hn::And(pair, hn::Set(du, 0xffff0000u)));
          w_even = hn::BitCast(df, hn::ShiftLeft<16>(pair));
        }
      };
      const float* xk = xp + k * MR * 2;  // [MR][2]: each token's even and odd x
      if constexpr (NV <= MR) {
        VF w_even[NV], w_odd[NV];
        for (int j = 0; j < NV; ++j) weights(j, w_even[j], w_odd[j]);
        for (int t = 0; t < MR; ++t) {
          const VF x_even = hn::Set(df, xk[2 * t]), x_odd = hn::Set(df, xk[2 * t + 1]);
          for (int j = 0; j < NV; ++j) {
            even[t][j] = Fma(x_even, w_even[j], even[t][j]);
            odd[t][j] = Fma(x_odd, w_odd[j], odd[t][j]);
          }
        }
      } else {
        VF x_even[MR], x_odd[MR];
        for (int t = 0; t < MR; ++t) {
          x_even[t] = hn::Set(df, xk[2 * t]);
          x_odd[t] = hn::Set(df, xk[2 * t + 1]);
        }
        for (int j = 0; j < NV; ++j) {
          VF w_even, w_odd;
          weights(j, w_even, w_odd);
          for (int t = 0; t < MR; ++t) {
            even[t][j] = Fma(x_even[t], w_even, even[t][j]);
            odd[t][j] = Fma(x_odd[t], w_odd, odd[t][j]);
          }
        }
      }
    }
    for (int t = 0; t < MR; ++t)
      for (int j = 0; j < NV; ++j) {
        float* o = out + t * NV * kLanes + j * kLanes;
        hn::Store(hn::Add(hn::Load(df, o), hn::Add(even[t][j], odd[t][j])), df, o);
      }
  }
}

template <class Kind>
struct TileFn {
  int64_t panel_bytes, k_steps;
  int MaxPanels(int mr) const { return Fits<Kind>(mr, 4) ? 4 : Fits<Kind>(mr, 2) ? 2 : 1; }
  template <int MR>
  void Run(int np, const float* xp, const uint8_t* w, float* out) const {
    if constexpr (MR <= MaxTokens<Kind>()) {
      if constexpr (Fits<Kind>(MR, 4)) {
        if (np == 4) return Run<MR, 4>(xp, w, out);
      }
      if constexpr (Fits<Kind>(MR, 2)) {
        if (np == 2) return Run<MR, 2>(xp, w, out);
      }
      return Run<MR, 1>(xp, w, out);
    }
  }
  template <int MR, int NP>
  void Run(const float* xp, const uint8_t* w, float* out) const {
    if constexpr (std::is_same_v<Kind, KindPairs>) {
      TilePairs<MR, NP>(xp, w, panel_bytes, k_steps, out);
    } else {
      Tile<MR, NP, Kind>(xp, w, panel_bytes, k_steps, out);
    }
  }
  void operator()(int mr, int np, const float* xp, const uint8_t* w, float* out) const {
    gemm::WithTileHeight(mr, [&](auto height) { Run<decltype(height)::value>(np, xp, w, out); });
  }
};

// gemm_schedule.h's PortableHalvesChunk on the current target.
void HalvesChunk(const gemm::Task& task, const float* halves, int64_t kp_begin, int64_t kp_count,
                 float* out, bool accumulate) {
#if HWY_ARCH_X86
  const unsigned int csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8000u);  // FTZ, as the pairs kernel
#endif
  const gemm::TokenTiles tiles(task.n_tokens, task.tile_tokens);
  const auto* w = reinterpret_cast<const uint8_t*>(halves);
  for (int64_t i = 0; i < tiles.n_tiles; ++i) {
    const int64_t t0 = tiles.Begin(i);
    const int mr = tiles.Height(i);
    const float* xp = task.xp + t0 * task.floats_per_token + kp_begin * mr * 2;
    gemm::WithTileHeight(mr, [&](auto height) {
      constexpr int MR = decltype(height)::value;
      if constexpr (MR <= MaxTokens<KindPairs>())
        TilePairs<MR, 1, PairsSource::kHalves>(xp, w, 0, kp_count, out + t0 * gemm::kPanelRows,
                                               accumulate);
    });
  }
#if HWY_ARCH_X86
  _mm_setcsr(csr);
#endif
}

int MaxTileTokens(int path) {
  if (path == kPathPairs) return MaxTokens<KindPairs>();
  if (path == kPathF16) return MaxTokens<KindF16>();
  return MaxTokens<KindF32>();
}

// The thread's panels [pa, pb). The pairs kernel runs with MXCSR.FTZ set, as AMX flushes.
void RunRange(int path, const gemm::Task& task, int64_t pa, int64_t pb) {
  switch (path) {
    case kPathF32:
      return gemm::RunPanels(task, pa, pb, TileFn<KindF32>{task.panel_bytes, task.k_steps});
    case kPathF16:
      return gemm::RunPanels(task, pa, pb, TileFn<KindF16>{task.panel_bytes, task.k_steps});
    case kPathPairs: {
#if HWY_ARCH_X86
      const unsigned int csr = _mm_getcsr();
      _mm_setcsr(csr | 0x8000u);  // FTZ
#endif
      gemm::RunPanels(task, pa, pb, TileFn<KindPairs>{task.panel_bytes, task.k_steps});
#if HWY_ARCH_X86
      _mm_setcsr(csr);
#endif
      return;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(MaxTileTokens);
HWY_EXPORT(RunRange);
HWY_EXPORT(HalvesChunk);

namespace gemm {

int PortableTileTokens(bool pairs) {
  return HWY_DYNAMIC_DISPATCH(MaxTileTokens)(pairs ? kPathPairs : kPathF32);
}

void PortableRange(bool pairs, const Task& task, int64_t pa, int64_t pb) {
  HWY_DYNAMIC_DISPATCH(RunRange)(pairs ? kPathPairs : kPathF32, task, pa, pb);
}

void PortableHalvesChunk(const Task& task, const float* halves, int64_t kp_begin, int64_t kp_count,
                         float* out, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(HalvesChunk)(task, halves, kp_begin, kp_count, out, accumulate);
}

}  // namespace gemm

namespace {

// The layout a call's input is packed in for the kernel the format table (format_table.h) chooses.
int PathOf(const PackedMatrix& w, int64_t n_tokens) {
  switch (ChooseGemmKernel(w.format(), w.precision(), n_tokens).kernel) {
    case GemmKernel::kF32Fma:
      return kPathF32;
    case GemmKernel::kF16Fma:
      return kPathF16;
    case GemmKernel::kBf16F32Act:
    case GemmKernel::kBf16Pairs:
      return kPathPairs;
    case GemmKernel::kBf16Amx:
      return kPathAmx;
    case GemmKernel::kBf16Dot:
      return kPathBf16Dot;
    case GemmKernel::kQuantInt8Avx2:
    case GemmKernel::kQuantInt8Avx2Expanded:
    case GemmKernel::kQuantInt8Vnni:
    case GemmKernel::kQuantInt8:
      return kPathQuant;
    case GemmKernel::kBf16Int16Avx2:
    case GemmKernel::kBf16Int16:
      return kPathInt16;
    default:  // the block-float GEMM, which runs the bfp rules itself (gemm_bfp.cpp)
      return kPathBfp;
  }
}

// Packs tokens [t0, t0 + mr) (one tile) of x into dst.
void PackTile(int path, bool round_bf16, const float* x, int64_t x_stride, int64_t cols,
              int64_t padded_cols, int mr, float* dst) {
  if (path == kPathBf16Dot) return PackBf16DotTile(x, x_stride, cols, padded_cols, mr, dst);
  for (int t = 0; t < mr; ++t) {
    const float* xt = x + t * x_stride;
    switch (path) {
      case kPathF32:
      case kPathF16:
        for (int64_t k = 0; k < cols; ++k) dst[k * mr + t] = xt[k];
        break;
      case kPathPairs:
        for (int64_t k = 0; k < padded_cols; ++k) {
          const float v = k < cols ? xt[k] : 0.0f;
          dst[((k / 2) * mr + t) * 2 + k % 2] = round_bf16 ? BF16ToF32(ActivationToBF16(v)) : v;
        }
        break;
    }
  }
}

}  // namespace

GemmInput PackGemmInput(const float* x, int64_t n_tokens, int64_t x_stride, const PackedMatrix& w) {
  WC_CHECK(n_tokens >= 0 && x_stride >= w.cols(), "bad gemm input shape");
  GemmInput in;
  in.path_ = PathOf(w, n_tokens);
  in.n_tokens_ = n_tokens;
  in.cols_ = w.padded_cols();
  in.x_cols_ = w.cols();
  in.precision_ = w.precision();
  if (in.path_ == kPathBfp) {
    in.bfp_ = PackBfpGemmInput(x, n_tokens, x_stride, w.bfp());
    return in;
  }
  if (in.path_ == kPathQuant) {
    in.quant_ = std::make_shared<const QuantInput>(
        QuantizeActivations(x, n_tokens, x_stride, w.cols(), ActivationOf(w.quant().type())));
    return in;
  }
  if (in.path_ == kPathInt16) {
    in.int16_ = std::make_shared<const Int16Input>(
        QuantizeInt16Activations(x, n_tokens, x_stride, w.cols()));
    return in;
  }
  if (in.path_ == kPathAmx) {
    in.amx_ = std::make_shared<const AmxGemmInput>(
        PackAmxGemmInput(x, n_tokens, x_stride, w.cols(), w.padded_cols()));
    return in;
  }
  in.tile_tokens_ =
      in.path_ == kPathBf16Dot ? kBf16DotTileTokens : HWY_DYNAMIC_DISPATCH(MaxTileTokens)(in.path_);
  // Two bf16 a float's room for the vdpbf16ps tiles' slots, an f32 each for the others.
  in.floats_per_token_ = in.path_ == kPathBf16Dot ? w.padded_cols() / 2 : w.padded_cols();
  in.data_.resize(static_cast<size_t>(std::max<int64_t>(1, n_tokens * in.floats_per_token_)));
  const gemm::TokenTiles tiles(n_tokens, in.tile_tokens_);
  const int64_t n_tiles = tiles.n_tiles;
  const bool round_bf16 = w.precision() == ActivationPrecision::kBF16;
  const bool parallel = !omp_in_parallel() && n_tiles > 1 && n_tokens * w.cols() >= (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < n_tiles; ++i) {
    const int64_t t0 = tiles.Begin(i);
    const int mr = tiles.Height(i);
    PackTile(in.path_, round_bf16, x + t0 * x_stride, x_stride, w.cols(), w.padded_cols(), mr,
             in.data_.data() + t0 * in.floats_per_token_);
  }
  return in;
}

int GemmTileTokens(const PackedMatrix& w, int64_t n_tokens) {
  const int path = PathOf(w, n_tokens);
  if (path == kPathBfp) return GemmBfpTileTokens(w.bfp(), n_tokens);
  if (path == kPathAmx) return AmxGemmInput::kTileTokens;
  if (path == kPathQuant || path == kPathInt16) return 4;
  if (path == kPathBf16Dot) return kBf16DotTileTokens;
  return HWY_DYNAMIC_DISPATCH(MaxTileTokens)(path);
}

bool GemmInput::Serves(const PackedMatrix& w) const {
  if (path_ == kPathQuant)  // one quantization of x serves every matrix of its activation kind
    return IsGgmlQuant(w.format()) && quant_->kind == ActivationOf(w.quant().type()) &&
           quant_->cols == w.cols();
  if (path_ == kPathInt16)  // one quantization of x serves every int16 matrix of its columns
    return PathOf(w, n_tokens_) == kPathInt16 && x_cols_ == w.cols();
  return path_ != kPathBfp && path_ == PathOf(w, n_tokens_) && cols_ == w.padded_cols() &&
         x_cols_ == w.cols() && precision_ == w.precision();
}

void Gemm(const GemmInput& x, const PackedMatrix& w, const float* bias, float* y, int64_t y_stride,
          int64_t row_begin, int64_t row_end) {
  WC_CHECK((x.path_ == kPathBfp) == IsBfp(w.format()), "gemm input packed for another matrix");
  if (x.path_ == kPathBfp) return GemmBfp(x.bfp_, w.bfp(), bias, y, y_stride, row_begin, row_end);
  WC_CHECK((x.path_ == kPathQuant) == IsGgmlQuant(w.format()),
           "gemm input packed for another matrix");
  if (x.path_ == kPathQuant)
    return QuantGemm(*x.quant_, w.quant(), bias, y, y_stride, row_begin, row_end);
  WC_CHECK((x.path_ == kPathInt16) == (w.precision() == ActivationPrecision::kInt16),
           "gemm input packed for another matrix");
  if (x.path_ == kPathInt16) return Int16Gemm(*x.int16_, w, bias, y, y_stride, row_begin, row_end);
  WC_CHECK(row_begin >= 0 && row_end <= w.rows() && row_begin <= row_end, "bad row range");
  WC_CHECK(x.cols_ == w.padded_cols(), "gemm input packed for another matrix");
  if (x.n_tokens_ == 0 || row_begin == row_end) return;
  gemm::Task task;
  task.xp = x.data_.data();
  task.floats_per_token = x.floats_per_token_;
  task.tile_tokens = x.tile_tokens_;
  task.n_tokens = x.n_tokens_;
  task.w = static_cast<const uint8_t*>(w.data());
  task.panel_bytes = w.panel_elems() * DTypeSize(w.dtype());
  task.k_steps = w.dtype() == DType::kBF16 ? w.padded_cols() / 2 : w.padded_cols();
  task.bias = bias;
  task.y = y;
  task.y_stride = y_stride;
  task.row_begin = row_begin;
  task.row_end = row_end;
  const int64_t pa = row_begin / gemm::kPanelRows;
  const int64_t pb = (row_end + gemm::kPanelRows - 1) / gemm::kPanelRows;
  const int path = x.path_;
  if (path == kPathAmx) {
    gemm::ForThreadPanels(pa, pb, [&](int64_t a, int64_t b) { GemmAmxRange(*x.amx_, task, a, b); });
    return;
  }
  if (path == kPathBf16Dot) {
    gemm::ForThreadPanels(pa, pb, [&](int64_t a, int64_t b) { GemmBf16DotRange(task, a, b); });
    return;
  }
  gemm::ForThreadPanels(pa, pb, [&](int64_t a, int64_t b) {
    HWY_DYNAMIC_DISPATCH(RunRange)(path, task, a, b);
  });
}

void Gemm(const float* x, int64_t n_tokens, const PackedMatrix& w, const float* bias, float* y) {
  const GemmInput in = PackGemmInput(x, n_tokens, w.cols(), w);
  Gemm(in, w, bias, y, w.rows(), 0, w.rows());
}

namespace {

// s kept for the process (the few names printed), so a const char* to it stays valid.
const char* Interned(std::string s) {
  static std::mutex mu;
  static std::set<std::string> names;
  const std::lock_guard<std::mutex> lock(mu);
  return names.insert(std::move(s)).first->c_str();
}

}  // namespace

const char* GemmKernelName(const PackedMatrix& w) {
  return Interned(std::string(WeightFormatName(w.format())) + ": " +
                  GemmKernelsByTokens(w.format(), w.precision()));
}

GemmPeak GemmPeakOf(const PackedMatrix& w, int64_t n_tokens) {
  return KernelInfo(ChooseGemmKernel(w.format(), w.precision(), n_tokens).kernel).peak;
}

bool GemmUsesAmx(const PackedMatrix& w, int64_t n_tokens) {
  return GemmPeakOf(w, n_tokens) == GemmPeak::kAmxBf16;
}

void SetGemmX86Kernels(bool enabled) {
  SetKernelsEnabled(CpuKernels::kAvx512Gemm, enabled);
  SetKernelsEnabled(CpuKernels::kAmxBf16Gemm, enabled);
  SetKernelsEnabled(CpuKernels::kAvx512Bf16Vbmi, enabled);
  SetKernelsEnabled(CpuKernels::kAvx2Gemm, enabled);
}

}  // namespace wc
#endif  // HWY_ONCE
