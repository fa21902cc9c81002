#include "kernels/gemm/quant/ggml_quants.h"

#include <cstring>

#include "util/bf16.h"
#include "util/error.h"

namespace wc {
namespace {

template <typename Block>
Block LoadGgmlBlock(const uint8_t* x, int64_t i) {
  Block b;
  std::memcpy(&b, x + i * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return b;
}

int64_t GgmlBlocksOf(int64_t k, int qk) {
  WC_CHECK(k >= 0 && k % qk == 0, "a row of ", k, " values is not whole blocks of ", qk);
  return k / qk;
}

}  // namespace

void DequantizeRowQ8_0(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = GgmlBlocksOf(k, kGgmlQK);
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = LoadGgmlBlock<BlockQ8_0>(x, i);
    const float d = F16ToF32(b.d);
    for (int j = 0; j < kGgmlQK; ++j) y[i * kGgmlQK + j] = b.qs[j] * d;
  }
}

void DequantizeRowQ4_0(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = GgmlBlocksOf(k, kGgmlQK);
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = LoadGgmlBlock<BlockQ4_0>(x, i);
    const float d = F16ToF32(b.d);
    for (int j = 0; j < kGgmlQK / 2; ++j) {
      const int x0 = (b.qs[j] & 0x0F) - 8;
      const int x1 = (b.qs[j] >> 4) - 8;
      y[i * kGgmlQK + j] = x0 * d;
      y[i * kGgmlQK + j + kGgmlQK / 2] = x1 * d;
    }
  }
}

void DequantizeRowQ4_1(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = GgmlBlocksOf(k, kGgmlQK);
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = LoadGgmlBlock<BlockQ4_1>(x, i);
    const float d = F16ToF32(b.d), m = F16ToF32(b.m);
    for (int j = 0; j < kGgmlQK / 2; ++j) {
      const int x0 = b.qs[j] & 0x0F;
      const int x1 = b.qs[j] >> 4;
      y[i * kGgmlQK + j] = x0 * d + m;
      y[i * kGgmlQK + j + kGgmlQK / 2] = x1 * d + m;
    }
  }
}

void DequantizeRowQ5_0(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = GgmlBlocksOf(k, kGgmlQK);
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = LoadGgmlBlock<BlockQ5_0>(x, i);
    const float d = F16ToF32(b.d);
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof(qh));
    for (int j = 0; j < kGgmlQK / 2; ++j) {
      const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
      const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
      const int32_t x0 = ((b.qs[j] & 0x0F) | xh_0) - 16;
      const int32_t x1 = ((b.qs[j] >> 4) | xh_1) - 16;
      y[i * kGgmlQK + j] = x0 * d;
      y[i * kGgmlQK + j + kGgmlQK / 2] = x1 * d;
    }
  }
}

void DequantizeRowQ5_1(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = GgmlBlocksOf(k, kGgmlQK);
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = LoadGgmlBlock<BlockQ5_1>(x, i);
    const float d = F16ToF32(b.d), m = F16ToF32(b.m);
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof(qh));
    for (int j = 0; j < kGgmlQK / 2; ++j) {
      const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
      const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
      const int x0 = (b.qs[j] & 0x0F) | xh_0;
      const int x1 = (b.qs[j] >> 4) | xh_1;
      y[i * kGgmlQK + j] = x0 * d + m;
      y[i * kGgmlQK + j + kGgmlQK / 2] = x1 * d + m;
    }
  }
}

void DequantizeRowQ4_K(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = GgmlBlocksOf(k, kGgmlQK_K);
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = LoadGgmlBlock<BlockQ4_K>(x, i);
    const float d = F16ToF32(b.d), min = F16ToF32(b.dmin);
    const uint8_t* q = b.qs;
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < kGgmlQK_K; j += 64) {
      GgmlScaleMinK4(is + 0, b.scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      GgmlScaleMinK4(is + 1, b.scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

void DequantizeRowQ5_K(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = GgmlBlocksOf(k, kGgmlQK_K);
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = LoadGgmlBlock<BlockQ5_K>(x, i);
    const float d = F16ToF32(b.d), min = F16ToF32(b.dmin);
    const uint8_t* ql = b.qs;
    const uint8_t* qh = b.qh;
    int is = 0;
    uint8_t sc, m;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < kGgmlQK_K; j += 64) {
      GgmlScaleMinK4(is + 0, b.scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      GgmlScaleMinK4(is + 1, b.scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

void DequantizeRowQ6_K(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = GgmlBlocksOf(k, kGgmlQK_K);
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = LoadGgmlBlock<BlockQ6_K>(x, i);
    const float d = F16ToF32(b.d);
    const uint8_t* ql = b.ql;
    const uint8_t* qh = b.qh;
    const int8_t* sc = b.scales;
    for (int n = 0; n < kGgmlQK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int8_t q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int8_t q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int8_t q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int8_t q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

}  // namespace wc
