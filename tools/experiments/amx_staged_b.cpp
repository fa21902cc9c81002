// Can bfp4 decode (one token) run on AMX? TDPBF16PS's cost against the number of A rows, and the
// cost of widening bfp4 codes into a B tile through memory (AMX has no register-to-tile move).
// Build: g++ -O2 amx_staged_b.cpp && ./a.out  (needs amx_bf16 in /proc/cpuinfo)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#define AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw"), noinline))

namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

alignas(64) uint32_t b_tiles[8][256];  // [buffer][16 k pairs x 16 rows]
alignas(64) uint16_t a_rows[16 * 32];  // A: up to 16 rows of 32 bf16
alignas(64) uint8_t codes[1 << 16];    // bfp4 chunks, 64 bytes = 16 rows x 8 k

double NsPer(std::chrono::steady_clock::time_point t0, int iters) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters * 1e9;
}

// Tiles 0-3: C (a_rows x 16 f32), 4: A (a_rows x 32 bf16), 5: B (16 x 32 bf16).
AMX void Configure(int a_rows_used) {
  TileConfig c;
  for (int t = 0; t < 5; ++t) {
    c.rows[t] = static_cast<uint8_t>(a_rows_used);
    c.colsb[t] = 64;
  }
  c.rows[5] = 16;
  c.colsb[5] = 64;
  // GCC 12's _tile_loadconfig tells the compiler it reads one byte: without a barrier the other
  // stores to c may be dropped or sunk past it.
  __asm__ volatile("" ::: "memory");
  _tile_loadconfig(&c);
  _tile_zero(0);
  _tile_zero(1);
  _tile_loadd(4, a_rows, 64);
  _tile_loadd(5, b_tiles[0], 64);
}

// Back-to-back TDPBF16PS into 2 C tiles: ns each.
AMX double DotOnly(int a_rows_used, int iters) {
  Configure(a_rows_used);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
  }
  const double ns = NsPer(t0, 2 * iters);
  _tile_release();
  return ns;
}

// One 512-weight B tile per step: widened from bfp4 codes (a shift and a vpermw per 64-byte row,
// stored), or not (widen = false), then loaded as B (from buffer `lag` steps back, of `buffers`)
// and multiplied by a 1-row A. ns per step.
AMX double StagedStep(bool widen, bool load, int buffers, int lag, int iters) {
  Configure(1);
  const __m512i table = _mm512_set1_epi16(0x3f80);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (widen) {
      uint32_t* b = b_tiles[i % buffers];
      const uint8_t* src = codes + (static_cast<size_t>(i) * 256) % sizeof codes;
      for (int g = 0; g < 4; ++g) {
        const __m512i c = _mm512_load_si512(src + 64 * g);
        for (int j = 0; j < 4; ++j)
          _mm512_store_si512(b + 16 * (4 * g + j),
                             _mm512_permutexvar_epi16(_mm512_srli_epi32(c, 4 * j), table));
      }
    }
    if (load) {
      _tile_loadd(4, a_rows, 64);
      _tile_loadd(5, b_tiles[(i + buffers - lag) % buffers], 64);
      _tile_dpbf16ps(0, 4, 5);
    }
  }
  const double ns = NsPer(t0, iters);
  _tile_release();
  return ns;
}

}  // namespace

int main() {
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
    std::perror("arch_prctl(ARCH_REQ_XCOMP_PERM)");
    return 1;
  }
  for (int rows : {1, 2, 4, 16})
    std::printf("TDPBF16PS, A of %2d rows:                %6.2f ns\n", rows,
                DotOnly(rows, 2000000));
  const int n = 1000000;
  std::printf("B loaded (no widening) + TDPBF16PS:      %6.2f ns\n",
              StagedStep(false, true, 2, 0, n));
  std::printf("widening + stores only:                  %6.2f ns\n",
              StagedStep(true, false, 8, 0, n));
  std::printf("widen, load the same buffer, TDPBF16PS:  %6.2f ns\n",
              StagedStep(true, true, 2, 0, n));
  std::printf("widen, load a buffer 4 steps old:        %6.2f ns\n",
              StagedStep(true, true, 8, 4, n));
  std::printf("widen, load a buffer 7 steps old:        %6.2f ns\n",
              StagedStep(true, true, 8, 7, n));
  return 0;
}
