// Internal to the packed GEMMs (gemm.cpp, gemm_amx.cpp, and the block-float ones,
// gemm_bfp*.cpp): the split of a call's panels over threads and the walk of one thread's panels,
// shared by every microkernel family, and the task they hand it.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace wc {
namespace gemm {

// One Gemm call as the kernels see it.
struct Task {
  const float* xp = nullptr;     // packed input (gemm.h's GemmInput layout)
  int64_t floats_per_token = 0;  // of xp
  int tile_tokens = 1;           // MR of xp's tiles
  int64_t n_tokens = 0;
  const uint8_t* w = nullptr;  // packed matrix: panel p at w + p * panel_bytes
  int64_t panel_bytes = 0;
  int64_t k_steps = 0;          // k per panel row: padded_cols (f32/f16) or padded_cols / 2 (pairs)
  const float* bias = nullptr;  // [rows] or nullptr
  float* y = nullptr;           // y[t * y_stride + (r - row_begin)]
  int64_t y_stride = 0;
  int64_t row_begin = 0, row_end = 0;
};

// One GemmBfp call as the block-float kernels see it (gemm_bfp*.cpp): base.w is
// BfpPanels::data(), panel p at w + p * base.panel_bytes; base.k_steps = k tiles.
struct BfpTask {
  Task base;
  int magnitude_bits = 7;          // B: 7 (bfp8) or 3 (bfp4)
  const uint8_t* plain = nullptr;  // [panels] BfpPanels::PanelIsPlain
  int64_t last_cols = 32;          // columns of the last k tile (1..32)
  bool one_token_avx512 = false;   // one token on plain panels: BfpOneTokenTile
  bool one_token_avx2 = false;     // the row groups' one token on plain panels: ...Avx2

  // True when np panels from the one at `w` (within base.w) are all plain.
  bool PanelsPlain(const uint8_t* w, int np) const {
    const int64_t p = (w - base.w) / base.panel_bytes;
    for (int i = 0; i < np; ++i)
      if (plain[p + i] == 0) return false;
    return true;
  }
};

constexpr int kPanelRows = 32;
constexpr int kMaxTileTokens = 12;
constexpr int kMaxTilePanels = 4;

// Calls fn(std::integral_constant<int, mr>()) for mr in [1, kMaxTileTokens]: a run-time tile
// height as a template argument.
template <class Fn, int... I>
void WithTileHeightImpl(int mr, const Fn& fn, std::integer_sequence<int, I...>) {
  (void)((mr == I + 1 ? (fn(std::integral_constant<int, I + 1>()), true) : false) || ...);
}
template <class Fn>
void WithTileHeight(int mr, const Fn& fn) {
  WithTileHeightImpl(mr, fn, std::make_integer_sequence<int, kMaxTileTokens>());
}

// The token tiles of n tokens at most mr_max high: as few as possible, balanced (heights differ by
// at most one, the taller first), so no thin tail tile runs short of accumulator chains.
struct TokenTiles {
  int64_t n_tiles, base, extra;
  TokenTiles(int64_t n, int mr_max)
      : n_tiles((n + mr_max - 1) / mr_max),
        base(n_tiles > 0 ? n / n_tiles : 0),
        extra(n_tiles > 0 ? n % n_tiles : 0) {}
  int64_t Begin(int64_t i) const { return i * base + std::min(i, extra); }
  int Height(int64_t i) const { return static_cast<int>(base + (i < extra ? 1 : 0)); }
};

// Tokens [t0, t0 + mr)'s rows [first, first + width) within [task.row_begin, task.row_end) from
// out [mr][width] into task.y, plus the bias where there is one.
inline void WriteRows(const Task& task, int64_t t0, int64_t mr, int64_t first, int64_t width,
                      const float* out) {
  const int64_t r_lo = std::max(task.row_begin, first);
  const int64_t r_hi = std::min(task.row_end, first + width);
  for (int64_t t = 0; t < mr; ++t) {
    float* yt = task.y + (t0 + t) * task.y_stride - task.row_begin;
    const float* ot = out + t * width - first;
    if (task.bias != nullptr) {
      for (int64_t r = r_lo; r < r_hi; ++r) yt[r] = ot[r] + task.bias[r];
    } else {
      for (int64_t r = r_lo; r < r_hi; ++r) yt[r] = ot[r];
    }
  }
}

// Runs panels [pa, pb) for every token tile. `tile` provides
//   int MaxPanels(int mr): the widest tile (1, 2 or 4 panels) of mr tokens its registers hold;
//   void operator()(int mr, int np, const float* xp, const uint8_t* w, float* out): the tile of mr
//     tokens (xp: the tile's packed input) by np panels from w, out: [mr][np * 32] (overwritten).
// Panels are walked in groups sized for the first tile so a group stays in cache across the token
// tiles; each result element is a function of its own x and W rows only (gemm.h's contract).
template <class TileFn>
void RunPanels(const Task& task, int64_t pa, int64_t pb, const TileFn& tile) {
  alignas(64) float out[kMaxTileTokens * kMaxTilePanels * kPanelRows];  // [mr][np * 32]
  const int64_t n = task.n_tokens;
  const TokenTiles tiles(n, task.tile_tokens);
  const int group = tile.MaxPanels(tiles.Height(0));
  for (int64_t p = pa; p < pb; p += group) {
    const int64_t g_end = std::min(pb, p + group);
    for (int64_t i = 0; i < tiles.n_tiles; ++i) {
      const int64_t t0 = tiles.Begin(i);
      const int mr = tiles.Height(i);
      const float* xp = task.xp + t0 * task.floats_per_token;
      for (int64_t q = p; q < g_end;) {
        const int64_t left = g_end - q;
        const int widest = tile.MaxPanels(mr);
        const int np = widest >= 4 && left >= 4 ? 4 : widest >= 2 && left >= 2 ? 2 : 1;
        tile(mr, np, xp, task.w + q * task.panel_bytes, out);
        WriteRows(task, t0, mr, q * kPanelRows, np * kPanelRows, out);
        q += np;
      }
    }
  }
}

// Runs run(a, b) over panels [pa, pb): contiguous chunks of about an eighth of a thread's share,
// taken by the OpenMP threads in turn as each finishes its last (dynamic), or whole on the calling
// thread inside a parallel region or for a single panel. On a shared host one core can run slower
// for a while, and a static split then left the other waiting at the call's end (bfp8 int8
// prefill of B, AVX2 kind, 139 against 167 tok/s in one such spell, level otherwise;
// docs/performance.md "bfp4 int8 in 16-bit words"). Each panel's results do not depend on the
// split (every element is its own chain), so the bits do not either.
template <class RunFn>
void ForThreadPanels(int64_t pa, int64_t pb, const RunFn& run) {
  if (pa >= pb) return;
  if (omp_in_parallel() || pb - pa <= 1) {
    run(pa, pb);
    return;
  }
#pragma omp parallel
  {
    const int64_t nth = omp_get_num_threads();
    const int64_t chunk = std::max<int64_t>(1, (pb - pa + 8 * nth - 1) / (8 * nth));
    const int64_t n_chunks = (pb - pa + chunk - 1) / chunk;
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t i = 0; i < n_chunks; ++i) run(pa + i * chunk, std::min(pb, pa + (i + 1) * chunk));
  }
}

// This thread's buffer of at least `bytes`, 64-byte aligned, kept (grow-only) for the next call;
// contents undefined. One buffer per kSlot, so kernels that nest (a widened panel read by the AMX
// tiles, which keep their own scratch) each hold their own.
enum ThreadBufferSlot : int {
  kWidenedPanelSlot = 0,
  kAmxScratchSlot = 1,
  kChunkOutSlot = 2,
  kQuantExpandedSlot = 3,  // quant_gemm_avx2_expanded.cpp: a segment's expanded blocks
  kQuantAccSlot = 4,       // and its tiles' accumulators between segments
  kBf16DotSumsSlot = 5,    // gemm_bf16_dot.cpp: the tiles' sums between k chunks
};
template <int kSlot>
void* ThreadBuffer(size_t bytes) {
  thread_local std::unique_ptr<void, decltype(&std::free)> storage{nullptr, &std::free};
  thread_local size_t capacity = 0;
  if (capacity < bytes) {
    storage.reset();
    storage.reset(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    if (storage == nullptr) throw std::bad_alloc();
    capacity = bytes;
  }
  return storage.get();
}

// gemm.cpp's portable tiles (Highway, the current target), for the block-float GEMM's panels
// widened once (gemm_bfp.cpp): task.w laid out as PackedMatrix's BF16 panels (pairs: the pair
// kernel, run under FTZ) or F32 panels, task.xp as GemmInput's layout for that kernel in tiles of
// PortableTileTokens(pairs) tokens.
int PortableTileTokens(bool pairs);
void PortableRange(bool pairs, const Task& task, int64_t pa, int64_t pb);

// The pairs kernel's tiles (under FTZ) over k steps [kp_begin, kp_begin + kp_count) (k pairs; both
// multiples of 16) of one panel whose weights are given as f32 halves, for every token tile of
// `task` (task.xp in the pairs layout, PortableTileTokens(true) high; task.w unused):
//   halves: [kp_count / 16][2][16][32] f32: per 32-k block the even k's rows, then the odd k's,
//           each the bf16 value the BF16 panel would hold, exactly;
//   out:    [task.n_tokens][32], zeroed first unless `accumulate` (then the chains of the previous
//           k steps, continued: chunk by chunk gives the same bits as the whole panel at once).
void PortableHalvesChunk(const Task& task, const float* halves, int64_t kp_begin, int64_t kp_count,
                         float* out, bool accumulate);

// K pairs per chunk of a panel widened into f32 halves (4 KB per 16 pairs: 128 KB, in L2 beside
// the tiles' inputs): every token tile reads the chunk. 512 ran 5 tokens about 1.3x faster than 16
// or 64 (one thread, in cache, K = 2048; AMD EPYC Zen 3, 512 KB of L2, 2026-11-27).
constexpr int64_t kHalvesChunkPairs = 512;

// Panels [pa, pb) of `task` (pairs layout, k_pairs k pairs a panel, a multiple of 16) through f32
// halves, chunk by chunk: widen(p, kp_begin, kp_count, halves) writes panel p's k pairs
// [kp_begin, kp_begin + kp_count) as PortableHalvesChunk's halves, every token tile runs on them
// before the next chunk, and the panel's rows go to y (WriteRows) after its last chunk: the same
// bits as the pairs kernel on the whole panel.
template <class WidenFn>
void RunHalves(const Task& task, int64_t k_pairs, int64_t pa, int64_t pb, const WidenFn& widen) {
  auto* halves = static_cast<float*>(ThreadBuffer<kWidenedPanelSlot>(
      static_cast<size_t>(kHalvesChunkPairs * 2 * kPanelRows * 4)));  // [chunk / 16][2][16][32]
  auto* out = static_cast<float*>(ThreadBuffer<kChunkOutSlot>(
      static_cast<size_t>(std::max<int64_t>(1, task.n_tokens) * kPanelRows * 4)));  // [n][32]
  for (int64_t p = pa; p < pb; ++p) {
    for (int64_t kp = 0; kp < k_pairs; kp += kHalvesChunkPairs) {
      const int64_t n = std::min(kHalvesChunkPairs, k_pairs - kp);
      widen(p, kp, n, halves);
      PortableHalvesChunk(task, halves, kp, n, out, kp > 0);
    }
    WriteRows(task, 0, task.n_tokens, p * kPanelRows, kPanelRows, out);
  }
}

}  // namespace gemm
}  // namespace wc
