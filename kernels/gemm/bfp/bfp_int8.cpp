// Block-float weights in 8-bit integers (bfp_int8.h): the tile conversion, the activations'
// quantization and the portable kernel. The AVX-512 VNNI kernel is quant_gemm_vnni.cpp's.
#include "kernels/gemm/bfp/bfp_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <omp.h>

#include "kernels/gemm/bfp/gemm_bfp.h"
#include "util/error.h"

namespace wc {
// Named, not anonymous: unity builds put other files' file-local names (a kTile) beside these.
namespace bfp_int8 {

constexpr int kDim = static_cast<int>(kBfpTileDim);

// c / 2^r rounded half to even (r >= 1; any r: beyond 8 every code rounds to 0).
int RoundShiftRight(int c, int r) {
  r = std::min(r, 16);
  return (c + (1 << (r - 1)) - 1 + ((c >> r) & 1)) >> r;
}

constexpr int64_t kHeader = 32;  // a half tile's header bytes

// Byte offsets of q[16 h + r, k] / c' in a half tile (bfp_int8.h).
int64_t Bfp8Int8Byte(int64_t r, int64_t k) {
  return kHeader + 64 * (k / 4) + 4 * r + k % 4;
}
int64_t Bfp4Int8Byte(int64_t r, int64_t k) {
  return kHeader + 64 * ((k % 16) / 4) + 4 * r + k % 4;
}

// The block exponent of (k, half h) in BfpPanels' bf16 layout (gemm_bfp.h).
int Bf16LayoutExponent(const uint8_t* tile, int64_t h, int64_t k) {
  return tile[(k / 2) * 4 + 2 * h + k % 2];
}

}  // namespace bfp_int8

void ConvertBfpTileToInt8(BfpFormat f, const uint8_t* tile, uint8_t* const halves[2],
                          float* scales) {
  const int headroom = 7 - BfpMagnitudeBits(f);    // L: bfp8 0, bfp4 4
  alignas(64) int8_t code[2][bfp_int8::kDim][16];  // [half][k][row in the half]: signed codes
  if (f == BfpFormat::kBfp8) {
    for (int k = 0; k < bfp_int8::kDim; ++k)
      for (int h = 0; h < 2; ++h)
        std::memcpy(code[h][k], tile + kBfpExponentBytes + 32 * k + 16 * h, 16);
  } else {
    for (int h = 0; h < 2; ++h)
      for (int g = 0; g < 4; ++g)
        for (int lane = 0; lane < 16; ++lane) {
          uint32_t word;
          std::memcpy(&word, tile + kBfpExponentBytes + (2 * g + h) * 64 + 4 * lane, 4);
          for (int j = 0; j < 8; ++j) {  // nibble at bit 4 j' + 16 b: k = 8 g + 2 j' + b
            const int k = 8 * g + 2 * (j % 4) + j / 4;
            const int nib = static_cast<int>((word >> (4 * (j % 4) + 16 * (j / 4))) & 0xf);
            code[h][k][lane] = static_cast<int8_t>(nib >= 8 ? nib - 16 : nib);
          }
        }
  }
  for (int h = 0; h < 2; ++h) {
    uint8_t* out = halves[h];
    std::memset(out, 0, static_cast<size_t>(BfpInt8HalfBytes(f)));
    bool nonzero[bfp_int8::kDim];
    int emax = 0;
    for (int k = 0; k < bfp_int8::kDim; ++k) {
      uint64_t lo, hi;
      std::memcpy(&lo, code[h][k], 8);
      std::memcpy(&hi, code[h][k] + 8, 8);
      nonzero[k] = (lo | hi) != 0;
      if (nonzero[k]) emax = std::max(emax, bfp_int8::Bf16LayoutExponent(tile, h, k));
    }
    scales[h] = std::ldexp(1.0f, emax - 133);  // exact: 2^-133 .. 2^121
    for (int k = 0; k < bfp_int8::kDim; ++k) {
      // A k of zero codes takes the largest shift (its q are 0 whatever it is): a half tile's
      // shifts alone then tell whether its exponents span at most 2 (bfp_int8_avx2.cpp).
      const int d =
          nonzero[k] ? bfp_int8::Bf16LayoutExponent(tile, h, k) - (emax - headroom) : headroom;
      if (f == BfpFormat::kBfp4) out[k] = static_cast<uint8_t>(std::max(d, 0));
      int8_t c[16];
      for (int r = 0; r < 16; ++r)
        c[r] = static_cast<int8_t>(d < 0 ? bfp_int8::RoundShiftRight(code[h][k][r], -d)
                                         : code[h][k][r]);
      if (f == BfpFormat::kBfp8) {
        uint8_t* o = out + bfp_int8::Bfp8Int8Byte(0, k);
        for (int r = 0; r < 16; ++r) o[4 * r] = static_cast<uint8_t>(c[r]);
      } else {
        uint8_t* o = out + bfp_int8::Bfp4Int8Byte(0, k);
        const int nib = (k / 16) * 4;
        for (int r = 0; r < 16; ++r) o[4 * r] |= static_cast<uint8_t>((c[r] & 0xf) << nib);
      }
    }
  }
}

int BfpInt8Weight(BfpFormat f, const uint8_t* half, int64_t r, int64_t k) {
  if (f == BfpFormat::kBfp8) return static_cast<int8_t>(half[bfp_int8::Bfp8Int8Byte(r, k)]);
  const int nib = (half[bfp_int8::Bfp4Int8Byte(r, k)] >> ((k / 16) * 4)) & 0xf;
  const int c = nib >= 8 ? nib - 16 : nib;
  return c * (1 << half[k]);
}

QuantInput QuantizeBfpInt8Input(const float* x, int64_t n_tokens, int64_t x_stride, int64_t cols,
                                int code_max, BfpInt8Codes extra) {
  const int64_t k32 = (cols + bfp_int8::kDim - 1) / bfp_int8::kDim * bfp_int8::kDim;
  QuantInput q;
  if (k32 == cols) {
    q = QuantizeActivations(x, n_tokens, x_stride, cols, QuantActivation::kA32, code_max);
  } else {
    std::vector<float> padded(static_cast<size_t>(std::max<int64_t>(1, n_tokens * k32)), 0.0f);
    for (int64_t t = 0; t < n_tokens; ++t)
      std::copy(x + t * x_stride, x + t * x_stride + cols, padded.data() + t * k32);
    q = QuantizeActivations(padded.data(), n_tokens, k32, k32, QuantActivation::kA32, code_max);
  }
  // The extra layouts are made on every thread, as the codes were (QuantizeActivations): serial,
  // one thread made 9 MB of them for a 512-token call at 18176 columns while the other waited.
  const bool parallel = !omp_in_parallel() && q.n_tokens * q.cols >= (1 << 16);
  if (extra == BfpInt8Codes::kUnsigned) {
    q.unsigned_codes.resize(q.codes.size());
    const int64_t n = static_cast<int64_t>(q.codes.size());
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < n; ++i)
      q.unsigned_codes[i] = static_cast<uint8_t>(static_cast<uint8_t>(q.codes[i]) ^ 0x80);
  } else if (extra == BfpInt8Codes::kBy8) {
    const int64_t groups = q.n_tokens / 8, cols32 = q.cols;
    const int8_t offset = q.code_max == 63 ? 64 : 0;  // 7-bit codes: x + 64 (QuantInput)
    q.codes_by8.resize(static_cast<size_t>(groups * 8 * cols32));
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t j = 0; j < cols32 / 4; ++j)
        for (int64_t t = 0; t < 8; ++t)
          for (int64_t i = 0; i < 4; ++i)
            q.codes_by8[static_cast<size_t>((g * cols32 / 4 + j) * 32 + 4 * t + i)] =
                static_cast<int8_t>(q.Codes(8 * g + t)[4 * j + i] + offset);
  }
  return q;
}

void BfpInt8PortableRange(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
                          int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa,
                          int64_t pb) {
  const int64_t kt = w.k_tiles();
  WC_CHECK(x.cols == kt * bfp_int8::kDim && x.kind == QuantActivation::kA32,
           "bfp int8 input shape");
  std::vector<float> acc(static_cast<size_t>(x.n_tokens * bfp_int8::kDim));  // [token][32 rows]
  int8_t q[bfp_int8::kDim][bfp_int8::kDim];                                  // [n][k] one tile
  for (int64_t p = pa; p < pb; ++p) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t b = 0; b < kt; ++b) {
      const float dw[2] = {w.Int8Scale(p, b, 0), w.Int8Scale(p, b, 1)};
      for (int64_t n = 0; n < bfp_int8::kDim; ++n) {
        const uint8_t* half = w.Int8Half(p, b, n / 16);
        for (int64_t k = 0; k < bfp_int8::kDim; ++k)
          q[n][k] = static_cast<int8_t>(BfpInt8Weight(w.format(), half, n % 16, k));
      }
      for (int64_t t = 0; t < x.n_tokens; ++t) {
        const int8_t* xq = x.Codes(t) + b * bfp_int8::kDim;
        const float dx = x.Dx(t)[b];
        for (int64_t n = 0; n < bfp_int8::kDim; ++n) {
          int32_t s = 0;
          for (int64_t k = 0; k < bfp_int8::kDim; ++k) s += q[n][k] * xq[k];
          float& a = acc[static_cast<size_t>(t * bfp_int8::kDim + n)];
          a = std::fma(dw[n / 16] * dx, static_cast<float>(s), a);
        }
      }
    }
    const int64_t r0 = std::max(p * bfp_int8::kDim, row_begin),
                  r1 = std::min(p * bfp_int8::kDim + bfp_int8::kDim, row_end);
    for (int64_t t = 0; t < x.n_tokens; ++t)
      for (int64_t r = r0; r < r1; ++r) {
        const float v = acc[static_cast<size_t>(t * bfp_int8::kDim + r - p * bfp_int8::kDim)];
        y[t * y_stride + (r - row_begin)] = bias ? v + bias[r] : v;
      }
  }
}

}  // namespace wc
