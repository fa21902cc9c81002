// Matrix-vector / matrix-matrix products against weights stored as F32, BF16 or F16, with
// run-time SIMD dispatch (Highway) and FP32 accumulation.
//
// Determinism contract: every output element y[t, r] is computed by exactly one thread with a
// fixed sequence of operations that depends only on `cols` (never on the number of tokens in the
// call, the row range, or the thread count). So a token's result is bit-identical whether it is
// computed alone (decode) or among many (prefill), and on any OMP_NUM_THREADS - and on any SIMD
// target with FMA (AVX2, every AVX-512): a dot product is lane_sums-inl.h's 16 lanes and tree.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/gemm/quant/quant_panels.h"

namespace wc {

enum class DType : uint8_t { kF32, kBF16, kF16 };

const char* DTypeName(DType dtype);
// The dtype DTypeName calls `name` ("F32", "BF16", "F16": safetensors' and GGML's names alike);
// nullopt for any other.
std::optional<DType> DTypeNamed(std::string_view name);
int DTypeSize(DType dtype);

// A read-only row-major matrix [rows, cols] (weights, or a view of cached K/V rows), `data` not
// necessarily aligned (it may point into a memory-mapped checkpoint). Row r starts at data + r *
// row_stride elements.
struct MatrixRef {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  // elements; == cols for dense matrices
  const void* data = nullptr;
  // A GGML-quantized matrix (a GGUF file's Q8_0 ... Q6_K tensor): each row is blocks of that type;
  // cols and row_stride count values (whole blocks) and `dtype` is unused. Only the weights' own
  // readers take one (MatrixRowBytes, MatrixAt, the GEMM's packing: PackedMatrix::FromGgmlRows);
  // MatMul refuses it.
  std::optional<GgmlQuant> quant;
};

// Bytes from one row of m to the next, and the address of m[r, c] (for a quantized m, c must
// start a block).
int64_t MatrixRowBytes(const MatrixRef& m);
const uint8_t* MatrixAt(const MatrixRef& m, int64_t r, int64_t c);

// y[t * y_stride + (r - row_begin)] = dot(x[t * x_stride, 0:cols], W[r, :]) (+ bias[r])
// for t in [0, n_tokens), r in [row_begin, row_end).
//   x: [n_tokens, x_stride] f32 (only the first w.cols of each row are read)
//   bias: [w.rows] f32 or nullptr
// MatMul splits rows over OpenMP threads (schedule static); MatMulSerial runs on the calling
// thread (for use inside an already-parallel region). Both give identical results.
void MatMul(const float* x, int64_t n_tokens, int64_t x_stride, const MatrixRef& w,
            const float* bias, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);
void MatMulSerial(const float* x, int64_t n_tokens, int64_t x_stride, const MatrixRef& w,
                  const float* bias, float* y, int64_t y_stride, int64_t row_begin,
                  int64_t row_end);

// Full-range convenience: y [n_tokens, w.rows].
inline void MatMul(const float* x, int64_t n_tokens, const MatrixRef& w, const float* bias,
                   float* y) {
  MatMul(x, n_tokens, w.cols, w, bias, y, w.rows, 0, w.rows);
}

// out[0:n] += a * bf16 v[0:n]
void AxpyBF16(float a, const uint16_t* v, float* out, int64_t n);

// Name of the SIMD target chosen at run time (e.g. "AVX3", "AVX2").
const char* SimdTargetName();

}  // namespace wc
