// The BF16 GEMM's vdpbf16ps tiles (gemm_bf16_dot.h): the tile, its schedule and the packing of
// its activations.
#include "kernels/gemm/bf16/gemm_bf16_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu_kernels.h"
#include "util/bf16.h"

namespace wc {

bool Bf16DotGemmAvailable() {
  return KernelsOn(CpuKernels::kAvx512Bf16Vbmi);
}

void PackBf16DotTile(const float* x, int64_t x_stride, int64_t cols, int64_t padded_cols, int mr,
                     float* dst) {
  const auto bits = [&](int t, int64_t k) -> uint32_t {
    return k < cols ? ActivationToBF16(x[t * x_stride + k]) : 0u;
  };
  for (int64_t q = 0; q < padded_cols / 4; ++q)
    for (int t = 0; t < mr; ++t) {
      const int64_t k = 4 * q;
      const uint32_t slots[2] = {bits(t, k + 2) | bits(t, k) << 16, bits(t, k + 3) | bits(t, k + 1)
                                                                                         << 16};
      std::memcpy(dst + (q * mr + t) * 2, slots, 8);
    }
}

}  // namespace wc

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")

namespace wc {
namespace {

constexpr int kPanelRows = gemm::kPanelRows;
constexpr int kPanelVecs = 2;      // 16-lane vectors across a panel's 32 rows
constexpr int kPairBytes = 128;    // one k pair of a panel: [32 rows][2] bf16
constexpr int kPrefetchPairs = 8;  // pairs ahead the weights are prefetched (two 32-k blocks)
// The schedule (GemmBf16DotRange): at most kChunkTokens tokens at a time; groups of panels (as
// many as the first token tile's registers hold), every token tile over a group's panels before
// the next group. A long k (over 2 kChunkPairs pairs) goes in chunks of about kChunkPairs, each
// over every group before the next, the tiles' sums kept between chunks (an exact copy: splitting
// k changes no bit): so a chunk of the activations (4 MiB at 512 tokens) stays in L3 while the
// panels pass, where the whole of them (18.6 MiB at K = 18176) would come from memory once per
// panel. The chunk size and the threshold were chosen on a wide down projection
// (docs/performance.md, "The BF16 GEMM on vdpbf16ps").
constexpr int64_t kChunkPairs = 2048;
constexpr int64_t kChunkTokens = 512;  // tokens a pass over the panels takes (bounds the sums)

// Tiles of mr tokens by np panels fit the 32 registers: an even and an odd chain per token and
// vector, the re-paired weights of every vector, and one token's two broadcasts (6 tokens x 1
// panel: 24 + 4 + 2). Holding more spills chains to the stack, where they run at a fraction of
// the rate.
constexpr bool Fits(int mr, int np) {
  const int nv = np * kPanelVecs;
  return mr <= kBf16DotTileTokens && 2 * mr * nv + 2 * nv + 2 <= 32;
}

// Pairs p, p + 1 of a weight vector ((k, k + 1) bf16 pairs at k = 2 p, 2 p + 2) re-paired into one
// chain's consecutive steps: even = (k + 2, k), odd = (k + 3, k + 1) in each 32-bit lane (low,
// high). vdpbf16ps takes the high element first: k before k + 2.
inline void Repair(__m512i p0, __m512i p1, __m512i* even, __m512i* odd) {
  constexpr __mmask32 kLow = 0x55555555u;  // the low 16-bit half of every 32-bit lane
  *even = _mm512_mask_blend_epi16(kLow, _mm512_slli_epi32(p0, 16), p1);
  *odd = _mm512_mask_blend_epi16(kLow, p0, _mm512_srli_epi32(p1, 16));
}

inline __m512bh Bf16(__m512i v) {
  return reinterpret_cast<__m512bh&>(v);
}

// The tile: MR tokens (xp: [k_steps / 2][MR][2] slots) by NP panels from w over k_steps pairs;
// out [MR][NP * 32] = per 32-k block, out += even + odd (gemm_amx.h's order), from zero or, when
// `accumulate`, from out (the sums of the pairs before). The chains take the registers; out stays
// in L1 between blocks (a load and a store per 16 pairs).
template <int MR, int NP>
__attribute__((noinline)) void Tile(const float* xp, const uint8_t* w, int64_t panel_bytes,
                                    int64_t k_steps, float* out, bool accumulate) {
  constexpr int NV = NP * kPanelVecs;
  if (!accumulate)
    for (int i = 0; i < MR * NV; ++i) _mm512_store_ps(out + 16 * i, _mm512_setzero_ps());
  const auto* xs = reinterpret_cast<const int32_t*>(xp);
  for (int64_t b = 0; b < k_steps; b += 16) {  // 32-k blocks: 16 pairs
    __m512 even[MR][NV], odd[MR][NV];
    for (int t = 0; t < MR; ++t)
      for (int j = 0; j < NV; ++j) even[t][j] = odd[t][j] = _mm512_setzero_ps();
    for (int64_t p = b; p < b + 16; p += 2) {
      const int32_t* xq = xs + (p / 2) * MR * 2;  // [MR][2] slots of k = 2 p .. 2 p + 3
      for (int i = 0; i < NP; ++i)  // the 4 lines of pairs p + 8, p + 9 (a no-op past the end)
        for (int line = 0; line < 4; ++line)
          _mm_prefetch(reinterpret_cast<const char*>(w + i * panel_bytes +
                                                     (p + kPrefetchPairs) * kPairBytes + 64 * line),
                       _MM_HINT_T0);
      __m512i we[NV], wo[NV];
      for (int j = 0; j < NV; ++j) {
        const uint8_t* src =
            w + (j / kPanelVecs) * panel_bytes + p * kPairBytes + (j % kPanelVecs) * 64;
        Repair(_mm512_loadu_si512(src), _mm512_loadu_si512(src + kPairBytes), &we[j], &wo[j]);
      }
      for (int t = 0; t < MR; ++t) {
        const __m512bh xe = Bf16(_mm512_set1_epi32(xq[2 * t]));
        const __m512bh xo = Bf16(_mm512_set1_epi32(xq[2 * t + 1]));
        for (int j = 0; j < NV; ++j) {
          even[t][j] = _mm512_dpbf16_ps(even[t][j], xe, Bf16(we[j]));
          odd[t][j] = _mm512_dpbf16_ps(odd[t][j], xo, Bf16(wo[j]));
        }
      }
    }
    for (int t = 0; t < MR; ++t)
      for (int j = 0; j < NV; ++j) {
        float* o = out + (t * NV + j) * 16;
        _mm512_store_ps(o, _mm512_add_ps(_mm512_load_ps(o), _mm512_add_ps(even[t][j], odd[t][j])));
      }
  }
}

int MaxPanels(int mr) {
  return Fits(mr, 4) ? 4 : Fits(mr, 2) ? 2 : 1;
}

// Tile<mr, np> for run-time mr and np (np <= MaxPanels(mr)).
template <int MR>
void TileOf(int np, const float* xp, const uint8_t* w, int64_t panel_bytes, int64_t k_steps,
            float* out, bool accumulate) {
  if constexpr (MR <= kBf16DotTileTokens) {
    if constexpr (Fits(MR, 4)) {
      if (np == 4) return Tile<MR, 4>(xp, w, panel_bytes, k_steps, out, accumulate);
    }
    if constexpr (Fits(MR, 2)) {
      if (np == 2) return Tile<MR, 2>(xp, w, panel_bytes, k_steps, out, accumulate);
    }
    return Tile<MR, 1>(xp, w, panel_bytes, k_steps, out, accumulate);
  }
}

// Panels [pa, pb) for token tiles [i0, i1) of `tiles` (the call's, as task.xp is packed; at most
// kChunkTokens tokens): k chunk by k chunk over every panel group, so a chunk of the activations
// (kChunkPairs pairs of every token) stays in L3 while each group's chunk of weights comes in once
// and stays in L2 for every token tile.
void RunTiles(const gemm::Task& task, const gemm::TokenTiles& tiles, int64_t i0, int64_t i1,
              int64_t pa, int64_t pb) {
  const int64_t first = tiles.Begin(i0);
  const int64_t n = tiles.Begin(i1 - 1) + tiles.Height(i1 - 1) - first;
  const int group = MaxPanels(tiles.Height(i0));
  const int64_t n_groups = (pb - pa + group - 1) / group;
  const int64_t n_chunks =
      task.k_steps > 2 * kChunkPairs ? (task.k_steps + kChunkPairs - 1) / kChunkPairs : 1;
  const int64_t chunk = (task.k_steps / n_chunks + 31) / 16 * 16;  // pairs, whole 32-k blocks
  // Per group, [n][group * 32] f32: token tile i's sums at its first token's row, [mr][np * 32]
  // per run of np panels of the group, one after the other; one group's when k is one chunk.
  const int64_t group_floats = n * group * kPanelRows;
  auto* sums = static_cast<float*>(gemm::ThreadBuffer<gemm::kBf16DotSumsSlot>(
      static_cast<size_t>(group_floats * (n_chunks > 1 ? n_groups : 1) * 4)));
  for (int64_t k0 = 0; k0 < task.k_steps || k0 == 0; k0 += chunk) {
    const int64_t kn = std::min(chunk, task.k_steps - k0);
    const bool last = k0 + chunk >= task.k_steps;
    for (int64_t p = pa; p < pb; p += group) {
      const int64_t g_end = std::min(pb, p + group);
      float* g_sums = sums + (n_chunks > 1 ? (p - pa) / group * group_floats : 0);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t t0 = tiles.Begin(i);
        const int mr = tiles.Height(i);
        const float* xp = task.xp + t0 * task.floats_per_token + k0 * mr;  // pair k0's slots
        for (int64_t q = p; q < g_end;) {
          const int64_t left = g_end - q;
          const int widest = MaxPanels(mr);
          const int np = widest >= 4 && left >= 4 ? 4 : widest >= 2 && left >= 2 ? 2 : 1;
          float* out = g_sums + ((t0 - first) * group + (q - p) * mr) * kPanelRows;
          gemm::WithTileHeight(mr, [&](auto height) {
            TileOf<decltype(height)::value>(np, xp, task.w + q * task.panel_bytes + k0 * kPairBytes,
                                            task.panel_bytes, kn, out, k0 > 0);
          });
          if (last) gemm::WriteRows(task, t0, mr, q * kPanelRows, np * kPanelRows, out);
          q += np;
        }
      }
    }
  }
}

}  // namespace

void GemmBf16DotRange(const gemm::Task& task, int64_t pa, int64_t pb) {
  // The final additions flush as AMX and the pairs kernel do (vdpbf16ps flushes by itself).
  const unsigned int csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8000u);
  const gemm::TokenTiles tiles(task.n_tokens, task.tile_tokens);
  for (int64_t i0 = 0; i0 < tiles.n_tiles;) {  // passes of whole tiles, at most kChunkTokens
    int64_t i1 = i0 + 1;
    while (i1 < tiles.n_tiles &&
           tiles.Begin(i1) + tiles.Height(i1) - tiles.Begin(i0) <= kChunkTokens)
      ++i1;
    RunTiles(task, tiles, i0, i1, pa, pb);
    i0 = i1;
  }
  _mm_setcsr(csr);
}

}  // namespace wc

#pragma GCC pop_options
