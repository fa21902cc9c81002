// GGML's quantized weights (kernels/gemm/quant/ggml_quants.h: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
// Q5_K, Q6_K) repacked once at load for the integer GEMM (quant_gemm.h): rows interleaved by 8,
// each weight kept in its own bits.
//
// Why this layout: the GEMM multiplies 8-bit activations by the codes with x86's byte dot products
// (vpmaddubsw + vpmaddwd on AVX2, vpdpbusd with VNNI), which sum 4 neighbouring bytes into one
// 32-bit lane. With the 8 rows of a group in the 8 lanes, each lane holding 4 consecutive codes of
// its row, one broadcast of 4 activation bytes feeds all 8 rows and no horizontal sum is ever
// needed (ik_llama.cpp's `_R8` layouts do the same). A group's blocks follow in k order, so a
// kernel reads each group as one stream.
//
// Group block layouts, for one GGML block of each of the 8 rows (r = row in the group, "lane r" =
// bytes [4 r, 4 r + 4) of a 32-byte vector; f16 fields are IEEE halves as the file stores them):
//   Q8_0  d[8] f16 | 8 vectors v: lane r = row r's qs[4 v .. 4 v + 3]                       272 B
//   Q4_0  d[8] f16 | 4 vectors v: lane r = row r's qs[4 v .. 4 v + 3] (low nibble: value 4 v + b,
//         high nibble: value 16 + 4 v + b)                                                   144 B
//   Q4_1  d[8] f16, m[8] f16 | the 4 vectors of Q4_0                                          160 B
//   Q5_0  d[8] f16 | qh[8] u32 (row r's 5th bits, bit i = value i) | Q4_0's 4 vectors         176 B
//   Q5_1  d[8], m[8] f16 | qh[8] u32 | Q4_0's 4 vectors                                       192 B
//   Q4_K  d[8], dmin[8] f16 | sc[8 sub][8 rows] u8, m[8 sub][8 rows] u8 (get_scale_min_k4's
//         6-bit values, unpacked) | 32 vectors (c, v), c < 4, v < 8: lane r = row r's
//         qs[32 c + 4 v .. + 3] (low nibble: value 64 c + 4 v + b, sub-block 2 c; high: value
//         64 c + 32 + 4 v + b, sub-block 2 c + 1)                                             1184
//         B
//   Q5_K  Q4_K's scales | 8 vectors v of 5th bits: lane r = row r's qh[4 v .. 4 v + 3] (bit 2 c
//         of byte b: value 64 c + 4 v + b; bit 2 c + 1: value 64 c + 32 + 4 v + b) | Q4_K's 32
//         code vectors                                                                        1440
//         B
//   Q6_K  d[8] f16 | sc[16 sub][8 rows] i8 | 32 vectors (n, v), n < 2, v < 16: lane r = row r's
//         ql[64 n + 4 v .. + 3] (low nibble: value 128 n + 4 v + b, high: 128 n + 64 + 4 v + b)
//         | 16 vectors (n, v), v < 8: lane r = row r's qh[32 n + 4 v .. + 3] (for value
//         128 n + 32 h + 4 v + b, h < 4, bits 2 h, 2 h + 1 of byte b)                          1680
//         B
// Every layout but the K types' holds exactly the file's bytes, moved; Q4_K and Q5_K keep their
// scales as bytes (12 bytes a row become 16, 2.8% of the block), since the kernels read them per
// sub-block. Rows past `rows` (the last group's padding) are zero blocks: value 0.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "util/page_buffer.h"

namespace wc {

enum class GgmlQuant : uint8_t { kQ8_0, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ4_K, kQ5_K, kQ6_K };

inline constexpr GgmlQuant kGgmlQuants[] = {GgmlQuant::kQ8_0, GgmlQuant::kQ4_0, GgmlQuant::kQ4_1,
                                            GgmlQuant::kQ5_0, GgmlQuant::kQ5_1, GgmlQuant::kQ4_K,
                                            GgmlQuant::kQ5_K, GgmlQuant::kQ6_K};

// "Q8_0", ... as GGML names the type; GgmlQuantNamed is its inverse (nullopt for any other name).
const char* GgmlQuantName(GgmlQuant q);
std::optional<GgmlQuant> GgmlQuantNamed(std::string_view name);
// Values a block holds along a row (32, or 256 for the K types), and its bytes in a GGUF file.
int GgmlQuantBlockValues(GgmlQuant q);
int GgmlQuantBlockBytes(GgmlQuant q);
// Bytes of one group block (8 rows' blocks, the table above).
int QuantGroupBlockBytes(GgmlQuant q);
constexpr bool IsKQuant(GgmlQuant q) {
  return q == GgmlQuant::kQ4_K || q == GgmlQuant::kQ5_K || q == GgmlQuant::kQ6_K;
}

// Where a 32-value type's code vectors start in its group block (the table above): after d, m
// (Q4_1, Q5_1) and qh (Q5_0, Q5_1).
constexpr int QuantGroupCodesOffset(GgmlQuant q) {
  return q == GgmlQuant::kQ8_0 || q == GgmlQuant::kQ4_0 ? 16
         : q == GgmlQuant::kQ4_1                        ? 32
         : q == GgmlQuant::kQ5_0                        ? 48
                                                        : 64;
}

// f(std::integral_constant<GgmlQuant, T>()) for q's type T: one switch for every kernel.
template <typename F>
void ForQuantType(GgmlQuant q, F&& f) {
  switch (q) {
#define WC_QUANT_CASE(T) \
  case T:                \
    return f(std::integral_constant<GgmlQuant, T>());
    WC_QUANT_CASE(GgmlQuant::kQ8_0)
    WC_QUANT_CASE(GgmlQuant::kQ4_0)
    WC_QUANT_CASE(GgmlQuant::kQ4_1)
    WC_QUANT_CASE(GgmlQuant::kQ5_0)
    WC_QUANT_CASE(GgmlQuant::kQ5_1)
    WC_QUANT_CASE(GgmlQuant::kQ4_K)
    WC_QUANT_CASE(GgmlQuant::kQ5_K)
    WC_QUANT_CASE(GgmlQuant::kQ6_K)
#undef WC_QUANT_CASE
  }
}

// y[0:k] = ggml's values of the k / block values' blocks of `q` at x (ggml_quants.h).
void DequantizeGgmlRow(GgmlQuant q, const uint8_t* x, float* y, int64_t k);

class QuantPanels {
 public:
  static constexpr int kGroupRows = 8;

  QuantPanels() = default;
  QuantPanels(QuantPanels&&) noexcept = default;
  QuantPanels& operator=(QuantPanels&&) noexcept = default;

  // Called after source rows [row_begin, row_end) are repacked (in blocks of rows, in order), so a
  // caller can release them.
  using RowsDone = std::function<void(int64_t row_begin, int64_t row_end)>;

  // The matrix W [rows, cols] whose row r is the GGML blocks at src + r * row_bytes (cols / block
  // values blocks of `type`, any alignment), repacked in parallel over groups. Throws wc::Error
  // naming `name` when cols is not whole blocks or row_bytes is short of them.
  static QuantPanels FromRows(GgmlQuant type, const uint8_t* src, int64_t rows, int64_t cols,
                              int64_t row_bytes, const std::string& name,
                              const RowsDone& done = nullptr);

  GgmlQuant type() const { return type_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t groups() const { return (rows_ + kGroupRows - 1) / kGroupRows; }
  int64_t blocks() const { return cols_ / GgmlQuantBlockValues(type_); }  // per row
  // Bytes of one group block (the table above), of one group, and held.
  int64_t group_block_bytes() const { return group_block_bytes_; }
  int64_t group_bytes() const { return blocks() * group_block_bytes_; }
  size_t bytes() const { return static_cast<size_t>(groups() * group_bytes()); }
  bool empty() const { return rows_ == 0; }
  // Group g's first block; its block b is at + b * group_block_bytes().
  const uint8_t* group(int64_t g) const { return data_.data() + g * group_bytes(); }

  // W[r, k] exactly as ggml dequantizes it (ggml_quants.h), read from the packed layout.
  float At(int64_t r, int64_t k) const;
  // out[0:cols] = row r as At gives it. out: [cols] f32.
  void Row(int64_t r, float* out) const;

 private:
  GgmlQuant type_ = GgmlQuant::kQ8_0;
  int64_t rows_ = 0, cols_ = 0;
  int64_t group_block_bytes_ = 0;
  PageBuffer data_;  // [groups][blocks][group_block_bytes], 2 MiB aligned
};

// One group block's codes and scales unpacked (the portable kernels' and At's view of the table
// above). codes[r][i]: row r's code of the block's value i, as an integer the value is an affine
// function of: Q8_0 the signed code; Q4_0 0..15 (value (q - 8) d); Q5_0 0..31 (value (q - 16) d);
// Q4_1 / Q5_1 q (value q d + m); Q4_K / Q5_K q (value (d sc) q - dmin m of its sub-block); Q6_K
// 0..63 (value (d sc) (q - 32)). d, m: f32 of the f16 fields (m: Q4_1 / Q5_1 m, K types dmin);
// sc, mins: per sub-block (Q4_K / Q5_K 8 of 32 values, sc and m 6-bit; Q6_K 16 of 16, sc signed).
struct UnpackedGroupBlock {
  int16_t codes[QuantPanels::kGroupRows][256];
  float d[QuantPanels::kGroupRows];
  float m[QuantPanels::kGroupRows];
  int16_t sc[QuantPanels::kGroupRows][16];
  int16_t mins[QuantPanels::kGroupRows][8];
};
void UnpackGroupBlock(GgmlQuant type, const uint8_t* block, UnpackedGroupBlock* out);

}  // namespace wc
