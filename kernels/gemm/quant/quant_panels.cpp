#include "kernels/gemm/quant/quant_panels.h"

#include <algorithm>
#include <cstring>

#include "kernels/gemm/quant/ggml_quants.h"
#include "util/bf16.h"
#include "util/error.h"

namespace wc {
namespace {

constexpr int kQuantGroupRows = QuantPanels::kGroupRows;

struct QuantInfo {
  GgmlQuant type;
  const char* name;
  int values;       // a block's values along a row
  int bytes;        // a block's bytes in the file
  int group_bytes;  // a group block's bytes (quant_panels.h's table)
};

constexpr QuantInfo kQuantInfo[] = {
    {GgmlQuant::kQ8_0, "Q8_0", 32, 34, 272},    {GgmlQuant::kQ4_0, "Q4_0", 32, 18, 144},
    {GgmlQuant::kQ4_1, "Q4_1", 32, 20, 160},    {GgmlQuant::kQ5_0, "Q5_0", 32, 22, 176},
    {GgmlQuant::kQ5_1, "Q5_1", 32, 24, 192},    {GgmlQuant::kQ4_K, "Q4_K", 256, 144, 1184},
    {GgmlQuant::kQ5_K, "Q5_K", 256, 176, 1440}, {GgmlQuant::kQ6_K, "Q6_K", 256, 210, 1680},
};

const QuantInfo& InfoOf(GgmlQuant q) {
  return kQuantInfo[static_cast<int>(q)];
}

uint16_t LoadHalfBits(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

uint32_t LoadWord(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Copies 4-byte words: vector v's lane r = the word at srcs[r] + src_offset + 4 v, for
// v < vectors, into dst (vectors x 32 bytes).
void InterleaveWords(const uint8_t* const* srcs, int64_t src_offset, int vectors, uint8_t* dst) {
  for (int v = 0; v < vectors; ++v)
    for (int r = 0; r < kQuantGroupRows; ++r)
      std::memcpy(dst + 32 * v + 4 * r, srcs[r] + src_offset + 4 * v, 4);
}

// The group block of `type` from the 8 rows' blocks at srcs[r] (each one file block).
void PackGroupBlock(GgmlQuant type, const uint8_t* const* srcs, uint8_t* dst) {
  switch (type) {
    case GgmlQuant::kQ8_0:  // d | 8 vectors
      for (int r = 0; r < kQuantGroupRows; ++r) std::memcpy(dst + 2 * r, srcs[r], 2);
      InterleaveWords(srcs, 2, 8, dst + 16);
      return;
    case GgmlQuant::kQ4_0:  // d | 4 vectors
      for (int r = 0; r < kQuantGroupRows; ++r) std::memcpy(dst + 2 * r, srcs[r], 2);
      InterleaveWords(srcs, 2, 4, dst + 16);
      return;
    case GgmlQuant::kQ4_1:  // d, m | 4 vectors
      for (int r = 0; r < kQuantGroupRows; ++r) {
        std::memcpy(dst + 2 * r, srcs[r], 2);
        std::memcpy(dst + 16 + 2 * r, srcs[r] + 2, 2);
      }
      InterleaveWords(srcs, 4, 4, dst + 32);
      return;
    case GgmlQuant::kQ5_0:  // d | qh | 4 vectors
      for (int r = 0; r < kQuantGroupRows; ++r) {
        std::memcpy(dst + 2 * r, srcs[r], 2);
        std::memcpy(dst + 16 + 4 * r, srcs[r] + 2, 4);
      }
      InterleaveWords(srcs, 6, 4, dst + 48);
      return;
    case GgmlQuant::kQ5_1:  // d, m | qh | 4 vectors
      for (int r = 0; r < kQuantGroupRows; ++r) {
        std::memcpy(dst + 2 * r, srcs[r], 2);
        std::memcpy(dst + 16 + 2 * r, srcs[r] + 2, 2);
        std::memcpy(dst + 32 + 4 * r, srcs[r] + 4, 4);
      }
      InterleaveWords(srcs, 8, 4, dst + 64);
      return;
    case GgmlQuant::kQ4_K:
    case GgmlQuant::kQ5_K: {  // d, dmin | sc[8][8], m[8][8] | (Q5_K: 8 qh vectors) | 32 vectors
      const bool q5 = type == GgmlQuant::kQ5_K;
      for (int r = 0; r < kQuantGroupRows; ++r) {
        std::memcpy(dst + 2 * r, srcs[r], 2);
        std::memcpy(dst + 16 + 2 * r, srcs[r] + 2, 2);
        for (int j = 0; j < 8; ++j)
          GgmlScaleMinK4(j, srcs[r] + 4, dst + 32 + 8 * j + r, dst + 96 + 8 * j + r);
      }
      if (q5) InterleaveWords(srcs, 16, 8, dst + 160);
      InterleaveWords(srcs, q5 ? 48 : 16, 32, dst + (q5 ? 416 : 160));
      return;
    }
    case GgmlQuant::kQ6_K:  // d | sc[16][8] | 32 ql vectors | 16 qh vectors
      for (int r = 0; r < kQuantGroupRows; ++r) {
        std::memcpy(dst + 2 * r, srcs[r] + 208, 2);
        for (int s = 0; s < 16; ++s) dst[16 + 8 * s + r] = srcs[r][192 + s];
      }
      InterleaveWords(srcs, 0, 32, dst + 144);
      InterleaveWords(srcs, 128, 16, dst + 144 + 1024);
      return;
  }
}

}  // namespace

const char* GgmlQuantName(GgmlQuant q) {
  return InfoOf(q).name;
}

std::optional<GgmlQuant> GgmlQuantNamed(std::string_view name) {
  for (const QuantInfo& i : kQuantInfo)
    if (name == i.name) return i.type;
  return std::nullopt;
}

int GgmlQuantBlockValues(GgmlQuant q) {
  return InfoOf(q).values;
}

int GgmlQuantBlockBytes(GgmlQuant q) {
  return InfoOf(q).bytes;
}

void DequantizeGgmlRow(GgmlQuant q, const uint8_t* x, float* y, int64_t k) {
  constexpr DequantizeRowFn kFns[] = {DequantizeRowQ8_0, DequantizeRowQ4_0, DequantizeRowQ4_1,
                                      DequantizeRowQ5_0, DequantizeRowQ5_1, DequantizeRowQ4_K,
                                      DequantizeRowQ5_K, DequantizeRowQ6_K};
  kFns[static_cast<int>(q)](x, y, k);
}

int QuantGroupBlockBytes(GgmlQuant q) {
  return InfoOf(q).group_bytes;
}

QuantPanels QuantPanels::FromRows(GgmlQuant type, const uint8_t* src, int64_t rows, int64_t cols,
                                  int64_t row_bytes, const std::string& name,
                                  const RowsDone& done) {
  const QuantInfo& info = InfoOf(type);
  if (rows < 0 || cols <= 0 || cols % info.values != 0)
    throw Error(name + ": " + std::to_string(cols) + " columns are not whole " + info.name +
                " blocks of " + std::to_string(info.values));
  const int64_t nb = cols / info.values;
  if (row_bytes < nb * info.bytes)
    throw Error(name + ": rows of " + std::to_string(row_bytes) + " bytes hold fewer than " +
                std::to_string(nb) + " " + info.name + " blocks");
  QuantPanels p;
  p.type_ = type;
  p.rows_ = rows;
  p.cols_ = cols;
  p.group_block_bytes_ = info.group_bytes;
  const int64_t groups = p.groups();
  p.data_ = PageBuffer(static_cast<size_t>(std::max<int64_t>(1, groups * p.group_bytes())));
  // A zero block for the padding rows of the last group (every field zero: value 0).
  const std::vector<uint8_t> zero(static_cast<size_t>(info.bytes), 0);
  // Groups in chunks, so `done` can release the rows of each chunk as it completes.
  constexpr int64_t kChunkGroups = 64;
  for (int64_t g0 = 0; g0 < groups; g0 += kChunkGroups) {
    const int64_t g1 = std::min(groups, g0 + kChunkGroups);
#pragma omp parallel for schedule(static)
    for (int64_t g = g0; g < g1; ++g) {
      uint8_t* out = p.data_.data() + g * p.group_bytes();
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* srcs[kQuantGroupRows];
        for (int r = 0; r < kQuantGroupRows; ++r) {
          const int64_t row = g * kQuantGroupRows + r;
          srcs[r] = row < rows ? src + row * row_bytes + b * info.bytes : zero.data();
        }
        PackGroupBlock(type, srcs, out + b * info.group_bytes);
      }
    }
    if (done) done(g0 * kQuantGroupRows, std::min(rows, g1 * kQuantGroupRows));
  }
  return p;
}

void UnpackGroupBlock(GgmlQuant type, const uint8_t* gb, UnpackedGroupBlock* out) {
  auto nibbles32 = [&](const uint8_t* vecs, int bits5_offset) {  // Q4_0 .. Q5_1 codes
    for (int r = 0; r < kQuantGroupRows; ++r) {
      const uint32_t qh = bits5_offset >= 0 ? LoadWord(gb + bits5_offset + 4 * r) : 0;
      for (int v = 0; v < 4; ++v)
        for (int b = 0; b < 4; ++b) {
          const uint8_t byte = vecs[32 * v + 4 * r + b];
          const int lo = 4 * v + b, hi = 16 + 4 * v + b;
          out->codes[r][lo] = static_cast<int16_t>((byte & 15) | (((qh >> lo) & 1) << 4));
          out->codes[r][hi] = static_cast<int16_t>((byte >> 4) | (((qh >> hi) & 1) << 4));
        }
    }
  };
  for (int r = 0; r < kQuantGroupRows; ++r) {
    out->d[r] = F16ToF32(LoadHalfBits(gb + 2 * r));
    out->m[r] = 0.0f;
  }
  switch (type) {
    case GgmlQuant::kQ8_0:
      for (int r = 0; r < kQuantGroupRows; ++r)
        for (int v = 0; v < 8; ++v)
          for (int b = 0; b < 4; ++b)
            out->codes[r][4 * v + b] = static_cast<int8_t>(gb[16 + 32 * v + 4 * r + b]);
      return;
    case GgmlQuant::kQ4_0:
      return nibbles32(gb + 16, -1);
    case GgmlQuant::kQ4_1:
      for (int r = 0; r < kQuantGroupRows; ++r) out->m[r] = F16ToF32(LoadHalfBits(gb + 16 + 2 * r));
      return nibbles32(gb + 32, -1);
    case GgmlQuant::kQ5_0:
      return nibbles32(gb + 48, 16);
    case GgmlQuant::kQ5_1:
      for (int r = 0; r < kQuantGroupRows; ++r) out->m[r] = F16ToF32(LoadHalfBits(gb + 16 + 2 * r));
      return nibbles32(gb + 64, 32);
    case GgmlQuant::kQ4_K:
    case GgmlQuant::kQ5_K: {
      const bool q5 = type == GgmlQuant::kQ5_K;
      const uint8_t* vecs = gb + (q5 ? 416 : 160);
      for (int r = 0; r < kQuantGroupRows; ++r) {
        out->m[r] = F16ToF32(LoadHalfBits(gb + 16 + 2 * r));
        for (int j = 0; j < 8; ++j) {
          out->sc[r][j] = gb[32 + 8 * j + r];
          out->mins[r][j] = gb[96 + 8 * j + r];
        }
        for (int c = 0; c < 4; ++c)
          for (int v = 0; v < 8; ++v)
            for (int b = 0; b < 4; ++b) {
              const uint8_t byte = vecs[32 * (8 * c + v) + 4 * r + b];
              const uint8_t h = q5 ? gb[160 + 32 * v + 4 * r + b] : 0;
              out->codes[r][64 * c + 4 * v + b] =
                  static_cast<int16_t>((byte & 15) | (((h >> (2 * c)) & 1) << 4));
              out->codes[r][64 * c + 32 + 4 * v + b] =
                  static_cast<int16_t>((byte >> 4) | (((h >> (2 * c + 1)) & 1) << 4));
            }
      }
      return;
    }
    case GgmlQuant::kQ6_K: {
      const uint8_t* ql = gb + 144;
      const uint8_t* qh = ql + 1024;
      for (int r = 0; r < kQuantGroupRows; ++r) {
        for (int s = 0; s < 16; ++s) out->sc[r][s] = static_cast<int8_t>(gb[16 + 8 * s + r]);
        for (int n = 0; n < 2; ++n)
          for (int v = 0; v < 16; ++v)
            for (int b = 0; b < 4; ++b) {
              const uint8_t byte = ql[32 * (16 * n + v) + 4 * r + b];
              const int lo = 4 * v + b, hi = 64 + 4 * v + b;  // values within half n
              const uint8_t hlo = qh[32 * (8 * n + lo / 4 % 8) + 4 * r + b];
              const uint8_t hhi = qh[32 * (8 * n + hi / 4 % 8) + 4 * r + b];
              out->codes[r][128 * n + lo] =
                  static_cast<int16_t>((byte & 15) | (((hlo >> (2 * (lo / 32))) & 3) << 4));
              out->codes[r][128 * n + hi] =
                  static_cast<int16_t>((byte >> 4) | (((hhi >> (2 * (hi / 32))) & 3) << 4));
            }
      }
      return;
    }
  }
}

namespace {

// Value j of row i of an unpacked group block, by ggml's own expressions and operation order
// (ggml_quants.cpp), so the values are its bits.
float ValueOf(GgmlQuant type, const UnpackedGroupBlock& u, int i, int j) {
  const int q = u.codes[i][j];
  const float d = u.d[i];
  switch (type) {
    case GgmlQuant::kQ8_0:
      return q * d;
    case GgmlQuant::kQ4_0:
      return (q - 8) * d;
    case GgmlQuant::kQ5_0:
      return (q - 16) * d;
    case GgmlQuant::kQ4_1:
    case GgmlQuant::kQ5_1:
      return q * d + u.m[i];
    case GgmlQuant::kQ4_K:
    case GgmlQuant::kQ5_K: {
      const float d1 = d * u.sc[i][j / 32], m1 = u.m[i] * u.mins[i][j / 32];
      return d1 * q - m1;
    }
    case GgmlQuant::kQ6_K:
      return d * u.sc[i][j / 16] * (q - 32);
  }
  return 0.0f;
}

}  // namespace

float QuantPanels::At(int64_t r, int64_t k) const {
  WC_CHECK(r >= 0 && r < rows_ && k >= 0 && k < cols_, "QuantPanels::At(", r, ", ", k, ")");
  const int values = GgmlQuantBlockValues(type_);
  UnpackedGroupBlock u;
  UnpackGroupBlock(type_, group(r / kQuantGroupRows) + (k / values) * group_block_bytes_, &u);
  return ValueOf(type_, u, static_cast<int>(r % kQuantGroupRows), static_cast<int>(k % values));
}

// Each block unpacked once (a tied quantized head serves every embedding lookup through here).
void QuantPanels::Row(int64_t r, float* out) const {
  WC_CHECK(r >= 0 && r < rows_, "QuantPanels::Row(", r, ")");
  const int values = GgmlQuantBlockValues(type_);
  const int i = static_cast<int>(r % kQuantGroupRows);
  UnpackedGroupBlock u;
  for (int64_t b = 0; b < blocks(); ++b) {
    UnpackGroupBlock(type_, group(r / kQuantGroupRows) + b * group_block_bytes_, &u);
    for (int j = 0; j < values; ++j) out[b * values + j] = ValueOf(type_, u, i, j);
  }
}

}  // namespace wc
