// BfpPanels (gemm_bfp.h): block-float weights in the GEMM kernels' panel layout, built through the
// codec (bfp_weights.h) from a matrix or reordered from tt-metal's tiles.
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/gemm/bfp/bfp_int8.h"
#include "kernels/gemm/bfp/gemm_bfp.h"
#include "util/bf16.h"
#include "util/error.h"

namespace wc {
namespace {

constexpr int64_t kTile = kBfpTileDim;

// bfp8: the byte of code (k, n) in its tile (gemm_bfp.h): row k of 32 codes, n in order.
inline int64_t Bfp8CodeByte(int64_t k, int64_t n) {
  return kBfpExponentBytes + 32 * k + n;
}

// A bfp8 code (sign << 7 | magnitude) as the panels hold it, the signed magnitude in two's
// complement (a zero magnitude is 0 whatever its sign), and back.
inline uint8_t Bfp8Stored(uint8_t code) {
  const int q = code & 0x7f;
  return static_cast<uint8_t>((code & 0x80) != 0 ? -q : q);
}
inline uint8_t Bfp8Code(uint8_t stored) {
  const int v = static_cast<int8_t>(stored);
  return static_cast<uint8_t>(v < 0 ? 0x80 | -v : v);
}
// The same for a bfp4 code (sign << 3 | magnitude) and its two's-complement nibble.
inline uint8_t Bfp4Stored(uint8_t code) {
  const int q = code & 7;
  return static_cast<uint8_t>(((code & 8) != 0 ? -q : q) & 0xf);
}
inline uint8_t Bfp4Code(uint8_t stored) {
  const int v = stored >= 8 ? stored - 16 : stored;
  return static_cast<uint8_t>(v < 0 ? 8 | -v : v);
}

// Runs fn(p) for panels [0, panels) in parallel (OpenMP); an exception from the lowest failing
// panel, whatever the thread count, is rethrown after the region.
template <class Fn>
void ForPanels(int64_t p0, int64_t p1, const Fn& fn) {
  int64_t bad = p1;
  std::string what;
#pragma omp parallel for schedule(static)
  for (int64_t p = p0; p < p1; ++p) {
    try {
      fn(p);
    } catch (const Error& e) {
#pragma omp critical(wc_bfp_panels_error)
      if (p < bad) {
        bad = p;
        what = e.what();
      }
    }
  }
  if (bad < p1) throw Error(what);
}

}  // namespace

void BfpPanels::Init(BfpFormat f, int64_t rows, int64_t cols, ActivationPrecision precision) {
  WC_CHECK(rows >= 0 && cols >= 0, "bad matrix shape");
  format_ = f;
  precision_ = precision;
  rows_ = rows;
  cols_ = cols;
  data_ = PageBuffer(static_cast<size_t>(std::max<int64_t>(1, panels() * panel_bytes())));
  plain_.assign(static_cast<size_t>(panels()), 1);
  if (IsInt8Codes(precision))
    int8_scales_.assign(static_cast<size_t>(panels() * k_tiles() * 2), 0.0f);
}

void BfpPanels::PutTile(int64_t tk, int64_t p, const uint8_t* tt) {
  // With kInt8 / kInt7 the tile is built here, then its halves written where the int8 layout keeps
  // them (bfp_int8.h), which is not one run.
  alignas(64) uint8_t staged[BfpTileBytes(BfpFormat::kBfp8)] = {};
  uint8_t* dst =
      IsInt8Codes(precision_) ? staged : data_.data() + p * panel_bytes() + tk * tile_bytes();
  const int b_bits = BfpMagnitudeBits(format_);
  bool plain = true;
  for (int64_t k = 0; k < kTile; ++k) {
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t face = (k / 16) * 2 + h, i = k % 16;
      const uint8_t e = tt[face * 16 + i];
      dst[(k / 2) * 4 + 2 * h + k % 2] = e;
      bool nonzero = false;
      for (int64_t j = 0; j < 16; ++j) {  // n = 16 h + j
        if (format_ == BfpFormat::kBfp8) {
          const uint8_t c = Bfp8Stored(tt[kBfpExponentBytes + (face * 16 + i) * 16 + j]);
          nonzero |= c != 0;
          dst[Bfp8CodeByte(k, 16 * h + j)] = c;
        } else {
          const uint8_t c = Bfp4Stored(
              (tt[kBfpExponentBytes + (face * 16 + i) * 8 + j / 2] >> (4 * (j % 2))) & 0xf);
          nonzero |= c != 0;
          const int64_t kk = k % 8, bit = 4 * (kk / 2) + 16 * (kk % 2);
          uint8_t& byte = dst[kBfpExponentBytes + (2 * (k / 8) + h) * 64 + 4 * j + bit / 8];
          byte = static_cast<uint8_t>(byte | c << (bit % 8));
        }
      }
      if (nonzero && (e < b_bits || e > 126 + b_bits)) plain = false;
    }
  }
  if (!plain) plain_[static_cast<size_t>(p)] = 0;
  if (IsInt8Codes(precision_)) {
    uint8_t* panel = data_.data() + p * panel_bytes();
    uint8_t* const halves[2] = {panel + BfpInt8HalfOffset(format_, k_tiles(), tk, 0),
                                panel + BfpInt8HalfOffset(format_, k_tiles(), tk, 1)};
    ConvertBfpTileToInt8(format_, staged, halves, int8_scales_.data() + (p * k_tiles() + tk) * 2);
  }
}

BfpPanels BfpPanels::FromMatrix(BfpFormat f, const MatrixRef& w, const std::string& name,
                                ActivationPrecision precision, const RowsDone& done) {
  WC_CHECK(w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kF16,
           "bad dtype");
  WC_CHECK(w.rows >= 0 && w.cols >= 0 && w.row_stride >= w.cols, "bad matrix shape");
  BfpPanels m;
  m.Init(f, w.rows, w.cols, precision);
  const int64_t panels = m.panels(), k_tiles = m.k_tiles();
  // Blocks of about 8 MiB of source rows, so `done` can release a large matrix while it is packed.
  const int64_t row_bytes = std::max<int64_t>(1, w.row_stride * DTypeSize(w.dtype));
  const int64_t block = std::max<int64_t>(1, (int64_t{8} << 20) / (kPanelRows * row_bytes));
  for (int64_t p0 = 0; p0 < panels; p0 += block) {
    const int64_t p1 = std::min(panels, p0 + block);
    ForPanels(p0, p1, [&](int64_t p) {
      uint32_t bits[kTile * kTile];                            // [32 k][32 n] one tile's values
      alignas(64) uint8_t tt[BfpTileBytes(BfpFormat::kBfp8)];  // one tile, tt-metal's layout
      for (int64_t tk = 0; tk < k_tiles; ++tk) {
        GatherBfpTile(w, name, tk, p, bits);
        PackBfpTile(f, bits, tt);
        m.PutTile(tk, p, tt);
      }
    });
    if (done) done(p0 * kPanelRows, std::min(w.rows, p1 * kPanelRows));
  }
  return m;
}

BfpTileSlice BfpTileSlice::Whole(const BfpLayout& layout, const uint8_t* tiles) {
  BfpTileSlice s;
  s.whole = layout;
  s.tiles = tiles;
  s.rows = layout.out;
  s.cols = layout.in;
  for (int64_t tn = 0; tn < layout.n_tiles(); ++tn) s.tile_cols.push_back(tn);
  return s;
}

BfpPanels BfpPanels::FromTiles(const BfpLayout& layout, const uint8_t* tiles,
                               const std::string& name, ActivationPrecision precision) {
  return FromTiles(BfpTileSlice::Whole(layout, tiles), name, precision);
}

BfpPanels BfpPanels::FromTiles(const BfpTileSlice& s, const std::string& name,
                               ActivationPrecision precision, const TileRowsDone& done) {
  BfpPanels m;
  m.Init(s.whole.format, s.rows, s.cols, precision);
  WC_CHECK(static_cast<int64_t>(s.tile_cols.size()) == m.panels(), "tile columns != panels");
  WC_CHECK(s.tk_begin >= 0 && s.tk_begin + m.k_tiles() <= s.whole.k_tiles(), "tile rows");
  for (const int64_t tn : s.tile_cols) WC_CHECK(tn >= 0 && tn < s.whole.n_tiles(), "tile column");
  // Blocks of whole tile rows of about 8 MiB of the source, so `done` can release a large tensor
  // while it is reordered (a tile row is one contiguous run of the source).
  const int64_t row_bytes = std::max<int64_t>(1, s.whole.n_tiles() * s.whole.tile_bytes());
  const int64_t block = std::max<int64_t>(1, (int64_t{8} << 20) / row_bytes);
  for (int64_t k0 = 0; k0 < m.k_tiles(); k0 += block) {
    const int64_t k1 = std::min(m.k_tiles(), k0 + block);
    ForPanels(0, m.panels(), [&](int64_t p) {
      const int64_t tn = s.tile_cols[static_cast<size_t>(p)];
      for (int64_t tk = k0; tk < k1; ++tk) {
        const uint8_t* tt = s.tiles + s.whole.TileOffset(s.tk_begin + tk, tn);
        for (int64_t i = 0; i < kBfpExponentBytes; ++i) {
          if (tt[i] == 255)
            throw Error(Cat(name, ": tile (", s.tk_begin + tk, ", ", tn, ") of this ",
                            BfpFormatName(s.whole.format),
                            " tensor has an exponent of 255 (Inf/NaN), which no packer writes"));
        }
        m.PutTile(tk, p, tt);
      }
    });
    if (done) done(s.tk_begin + k0, s.tk_begin + k1);
  }
  return m;
}

float BfpPanels::At(int64_t r, int64_t k) const {
  WC_CHECK(r >= 0 && r < rows_ && k >= 0 && k < cols_, "element out of range");
  const uint8_t* tile = data_.data() + (r / 32) * panel_bytes() + (k / 32) * tile_bytes();
  const int64_t n = r % 32, h = n / 16, lane = n % 16, kk = k % 32;
  if (IsInt8Codes(precision_))
    return static_cast<float>(BfpInt8Weight(format_, Int8Half(r / 32, k / 32, h), lane, kk)) *
           Int8Scale(r / 32, k / 32, h);
  const uint8_t e = tile[(kk / 2) * 4 + 2 * h + kk % 2];
  uint8_t code;
  if (format_ == BfpFormat::kBfp8) {
    code = Bfp8Code(tile[Bfp8CodeByte(kk, n)]);
  } else {
    const int64_t k8 = kk % 8, bit = 4 * (k8 / 2) + 16 * (k8 % 2);
    uint32_t word;
    std::memcpy(&word, tile + kBfpExponentBytes + (2 * (kk / 8) + h) * 64 + 4 * lane, 4);
    code = Bfp4Code(static_cast<uint8_t>((word >> bit) & 0xf));
  }
  return BfpDecode(format_, code, e);
}

void BfpPanels::Row(int64_t r, float* out) const {
  for (int64_t k = 0; k < cols_; ++k) out[k] = At(r, k);
}

}  // namespace wc
