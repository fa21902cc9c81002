// GGML's quantized weight blocks (llama.cpp b6673's ggml-common.h) and their exact dequantization
// to f32 (ggml-quants.c's dequantize_row_*), for the types issue 52 runs: Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K. Layouts and formulas: docs/gguf.md section 3.
//
// Why kernels/gemm/: the block structs are the weights' format, which the quantized GEMM (int8
// activations, a later slice of issue 52) reads as they are, and kernels/ must not include
// model/; the portable dequantizers beside them are that GEMM's reference and what `wormchat
// convert` writes. model/gguf/ggml_types.cpp names them in its one table of types.
//
// Exactness: each value is computed as ggml computes it, in f32 and in its order (Q4_1 and Q5_1
// `d * q + m`; the K types' `d * sc` and `dmin * m` products first, then `(d * sc) * q - dmin * m`;
// Q6_K `(d * sc) * q`), and the project compiles with -ffp-contract=off, so no product and sum
// fuse: the values are gguf-py's numpy dequantize's, bit for bit (tests/kernels/ggml_quants_test).
//
// Blocks are read with memcpy, so rows may start at any byte (a GGUF file's alignment may be 1).
#pragma once

#include <cstdint>

namespace wc {

inline constexpr int kGgmlQK = 32;     // values a block of the 32-types holds
inline constexpr int kGgmlQK_K = 256;  // values a K-type super-block holds
inline constexpr int kGgmlKScaleSize = 12;

// d: f16 bits. Value j = qs[j] * d.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kGgmlQK];
};
// Value j (j < 16) = ((qs[j] & 15) - 8) * d; value j + 16 = ((qs[j] >> 4) - 8) * d.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kGgmlQK / 2];
};
// As Q4_0 without the - 8: value = q * d + m.
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[kGgmlQK / 2];
};
// qh: the 5th bit of each of the 32 values (little-endian u32, bit j for value j). Value j (j < 16)
// = ((qs[j] & 15) | bit j << 4) - 16) * d; value j + 16 = ((qs[j] >> 4) | bit (j + 16) << 4) - 16)
// * d.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kGgmlQK / 2];
};
// As Q5_0 without the - 16: value = q * d + m.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kGgmlQK / 2];
};
// 8 sub-blocks of 32 values, each with a 6-bit scale and min packed in `scales` (get_scale_min_k4);
// value = (d * sc) * q - (dmin * m), q the 4-bit code (low nibbles of qs[32c..32c+31] are values
// 64c..64c+31, high nibbles 64c+32..64c+63).
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[kGgmlKScaleSize];
  uint8_t qs[kGgmlQK_K / 2];
};
// As Q4_K, with a 5th bit per value in qh (bit 2c of qh[l] for value 64c + l, bit 2c+1 for
// 64c + 32 + l).
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[kGgmlKScaleSize];
  uint8_t qh[kGgmlQK_K / 8];
  uint8_t qs[kGgmlQK_K / 2];
};
// 16 sub-blocks of 16 values, each with an int8 scale; 6-bit codes: low 4 bits in ql, high 2 in
// qh; value = (d * scales[s]) * (q - 32).
struct BlockQ6_K {
  uint8_t ql[kGgmlQK_K / 2];
  uint8_t qh[kGgmlQK_K / 4];
  int8_t scales[kGgmlQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 &&
                  sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210,
              "ggml-common.h's block sizes");

// ggml-quants.c's get_scale_min_k4: Q4_K / Q5_K sub-block j's (0..7) 6-bit scale and min from a
// super-block's 12 `scales` bytes.
inline void GgmlScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// y[0:k] = the values of the k / block values' blocks at `x` (any alignment). k is a multiple of
// the type's block (32, or 256 for the K types): checked.
using DequantizeRowFn = void (*)(const uint8_t* x, float* y, int64_t k);
void DequantizeRowQ8_0(const uint8_t* x, float* y, int64_t k);
void DequantizeRowQ4_0(const uint8_t* x, float* y, int64_t k);
void DequantizeRowQ4_1(const uint8_t* x, float* y, int64_t k);
void DequantizeRowQ5_0(const uint8_t* x, float* y, int64_t k);
void DequantizeRowQ5_1(const uint8_t* x, float* y, int64_t k);
void DequantizeRowQ4_K(const uint8_t* x, float* y, int64_t k);
void DequantizeRowQ5_K(const uint8_t* x, float* y, int64_t k);
void DequantizeRowQ6_K(const uint8_t* x, float* y, int64_t k);

}  // namespace wc
