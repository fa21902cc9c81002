// The formats a weight matrix is held in for the GEMM (--weights, model/weight_spec.h), and the
// block-float GEMM contract.
//
//   f32, f16, bf16   as PackedMatrix has always held them (packed_matrix.h): f16 only as a
//                    checkpoint stores it; bf16 from an f32 or f16 source is rounded to nearest
//                    even (f16 widened to f32 first, exactly), from a bf16 source copied.
//   bfp8, bfp4       Wormhole's BFP8_B / BFP4_B (bfp_weights.h): the matrix is quantized by the
//                    exact tt-metal packer, tile by tile, and multiplies as its DECODED values.
//   q8_0 .. q6_K     GGML's quantized blocks as a GGUF file holds them (quant_panels.h), only ever
//                    as stored; they multiply by 8-bit activations in integers (quant_gemm.h's
//                    contract), not as their decoded values.
//
// The block-float GEMM contract. A bfp matrix W multiplies exactly as the BF16 GEMM (gemm.h) on
// D = its decoded values (every code decodes to a bf16 exactly), with D's bf16 subnormals flushed
// to zero of their sign like any BF16 packing (AMX's DAZ); with ActivationPrecision kF32
// (--matmul-precision f32) it multiplies the exactly decoded, unflushed values as f32 weights,
// by f32 activations, in the F32 GEMM's order. PackedMatrix holds the packed tiles themselves
// (BfpPanels, gemm_bfp.h: 8.5 / 4.5 bits a weight) and the block-float GEMM widens them in
// registers, bit-identical to this. D[r, k] = FlushBF16Subnormal(BfpDecodeBF16(code, E)).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/gemm/bfp/bfp_weights.h"
#include "kernels/gemm/quant/quant_panels.h"
#include "kernels/matmul.h"

namespace wc {

enum class WeightFormat : uint8_t {
  kF32,
  kF16,
  kBF16,
  kBfp8,
  kBfp4,
  kQ8_0,  // kQ8_0 + GgmlQuant: the GGML types in quant_panels.h's order
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ4_K,
  kQ5_K,
  kQ6_K,
};

// How a BF16 (or bfp) matrix's activations enter its products (F32 and F16 matrices always use
// kF32).
//   kF32:  f32 activations times the widened bf16 weights, f32 FMAs (exact products).
//   kBF16: activations rounded to bf16 (nearest even), exact products summed in AMX TDPBF16PS's
//          order (gemm.h; AMX tiles where the CPU has them, FMA tiles elsewhere), at the cost of
//          the activation's rounding (relative 2^-9), as llama.cpp and bf16 PyTorch do.
//   kInt8: for bfp8 / bfp4 matrices only (bfp_int8.h; a BF16 matrix takes kBF16): activations
//          quantized to 8-bit blocks of 32 (quant_gemm.h's A32) and the codes, re-expressed along
//          K, multiplied in exact int32 sums, as llama.cpp multiplies Q8_0 / Q4_0. Not exact: the
//          activations' 8 bits, and in some blocks the weights' low bits (bfp_int8.h).
//   kInt7: kInt8 with activations quantized to 7-bit blocks (|code| <= 63, dx = amax / 63): the
//          same kernels and contract, one bit less per activation, so that AVX2 can multiply
//          x + 64 (unsigned, no sign step) by a bfp8 code as it is (bfp_int8.h). Not exact: its
//          perplexity is measured beside int8's.
//   kInt16: for BF16 matrices only (bf16_int16.h; a bfp matrix takes kBF16): the weights held as
//          16-bit integers with a power-of-two scale a row and 32 k, activations quantized to
//          12-bit blocks of 32, multiplied in exact int32 sums (vpmaddwd). Not exact: the
//          activations' 12 bits a block, and the weights' bits below 2^-15 of their block's
//          largest.
enum class ActivationPrecision : uint8_t { kF32, kBF16, kInt8, kInt16, kInt7 };

// kInt8 and kInt7: block-float weights times activations as int8 codes (bfp_int8.h; int7 codes are
// int8 codes within +-63).
constexpr bool IsInt8Codes(ActivationPrecision p) {
  return p == ActivationPrecision::kInt8 || p == ActivationPrecision::kInt7;
}
// The largest activation code of such a precision: 127, or 63 for kInt7.
constexpr int ActivationCodeMax(ActivationPrecision p) {
  return p == ActivationPrecision::kInt7 ? 63 : 127;
}

// "f32", "f16", "bf16", "bfp8", "bfp4", and GGML's names of its types ("Q8_0", "Q4_K");
// WeightFormatFromName is its inverse for the formats a matrix can be converted to (f32 .. bfp4;
// nullopt otherwise: a GGML type is only ever as stored).
const char* WeightFormatName(WeightFormat f);
std::optional<WeightFormat> WeightFormatFromName(std::string_view name);

constexpr bool IsGgmlQuant(WeightFormat f) {
  return f >= WeightFormat::kQ8_0;
}
constexpr GgmlQuant QuantOf(WeightFormat f) {  // IsGgmlQuant(f)
  return static_cast<GgmlQuant>(static_cast<int>(f) - static_cast<int>(WeightFormat::kQ8_0));
}
constexpr WeightFormat FormatOf(GgmlQuant q) {
  return static_cast<WeightFormat>(static_cast<int>(q) + static_cast<int>(WeightFormat::kQ8_0));
}

constexpr bool IsBfp(WeightFormat f) {
  return f == WeightFormat::kBfp8 || f == WeightFormat::kBfp4;
}
// The codec of a bfp format (IsBfp(f)).
constexpr BfpFormat BfpOf(WeightFormat f) {
  return f == WeightFormat::kBfp4 ? BfpFormat::kBfp4 : BfpFormat::kBfp8;
}
// A checkpoint dtype held as stored.
constexpr WeightFormat FormatOfDType(DType d) {
  return d == DType::kF32   ? WeightFormat::kF32
         : d == DType::kF16 ? WeightFormat::kF16
                            : WeightFormat::kBF16;
}

// The format a matrix is stored in: its GGML type (MatrixRef::quant), or its dtype's.
constexpr WeightFormat StoredFormat(const MatrixRef& m) {
  return m.quant ? FormatOf(*m.quant) : FormatOfDType(m.dtype);
}

// The bytes a W of HF shape [rows = out, cols = in] takes in format f, as the streaming GEMM holds
// it: f32/f16/bf16 the panel layout (rows padded to 32, bf16 cols to 32), bfp its tiles
// (BfpLayout::bytes(): 1088 or 576 bytes a 32x32 tile, K and N padded to 32), a GGML type its
// groups of 8 rows (QuantPanels::bytes()).
int64_t WeightFormatBytes(WeightFormat f, int64_t rows, int64_t cols);

// The bf16 bits h with a subnormal flushed to zero of its sign (AMX's DAZ): what every BF16
// packing stores.
constexpr uint16_t FlushBF16Subnormal(uint16_t h) {
  return (h & 0x7f80u) == 0 ? static_cast<uint16_t>(h & 0x8000u) : h;
}

}  // namespace wc
