#include "kernels/gemm/bfp/bfp_weights.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "util/bf16.h"
#include "util/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm/bfp/bfp_weights.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

// PackBfpTile's steps 1-5 on vectors of a block's 16 values (Highway): the scalar Encode below,
// lane by lane, with per-lane shifts (integers only, so every target writes the same bytes).
HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DU = hn::ScalableTag<uint32_t>;
using VU = hn::Vec<DU>;
constexpr int kBlock = 16;
constexpr int kLanes = static_cast<int>(hn::MaxLanes(DU()));
static_assert(kLanes <= kBlock, "a vector spans at most one block");
constexpr int kVecs = kBlock / kLanes;

// One block: codes[j] = step 5's code of bits[j], returns E (step 1).
template <int B>
HWY_INLINE uint32_t EncodeBlock(const uint32_t* HWY_RESTRICT bits, uint32_t* HWY_RESTRICT codes) {
  constexpr uint32_t kShift = 24 - B, kHalf = 1u << (kShift - 1), kRest = (1u << kShift) - 1;
  const DU du;
  VU v[kVecs], e[kVecs];
  VU emax = hn::Zero(du);
  for (int i = 0; i < kVecs; ++i) {
    v[i] = hn::LoadU(du, bits + i * kLanes);
    e[i] = hn::And(hn::ShiftRight<23>(v[i]), hn::Set(du, 0xffu));
    emax = hn::Max(emax, e[i]);
  }
  emax = hn::MaxOfLanes(du, emax);
  for (int i = 0; i < kVecs; ++i) {
    const VU down = hn::Sub(emax, e[i]);
    const VU mant = hn::Or(hn::Set(du, 0x800000u), hn::And(v[i], hn::Set(du, 0x7fffffu)));
    VU m = hn::operator>>(mant, hn::And(down, hn::Set(du, 31u)));
    const auto keep = hn::And(hn::Ne(e[i], hn::Zero(du)), hn::Lt(down, hn::Set(du, 32u)));
    m = hn::IfThenElseZero(keep, m);
    VU q = hn::ShiftRight<kShift>(m);
    const VU r = hn::And(m, hn::Set(du, kRest));
    const auto up = hn::Or(
        hn::Gt(r, hn::Set(du, kHalf)),
        hn::And(hn::Eq(r, hn::Set(du, kHalf)), hn::Ne(hn::And(q, hn::Set(du, 1u)), hn::Zero(du))));
    q = hn::IfThenElse(up, hn::Add(q, hn::Set(du, 1u)), q);
    q = hn::Min(q, hn::Set(du, (1u << B) - 1));
    const VU sign =
        hn::IfThenElseZero(hn::Ne(q, hn::Zero(du)), hn::ShiftLeft<B>(hn::ShiftRight<31>(v[i])));
    hn::StoreU(hn::Or(sign, q), du, codes + i * kLanes);
  }
  return hn::GetLane(emax);
}

// PackBfpTile (bfp_weights.h): bits [32 k][32 n] into tile's bytes, step 6's layout.
template <int B>
void PackTileB(const uint32_t* HWY_RESTRICT bits, uint8_t* HWY_RESTRICT tile) {
  constexpr int64_t kT = kBfpTileDim, kF = kBfpFaceDim;
  uint8_t* codes = tile + kBfpExponentBytes;
  HWY_ALIGN uint32_t c[kBlock + kLanes];
  for (int64_t face = 0; face < 4; ++face) {
    const int64_t k0 = (face / 2) * kF, n0 = (face % 2) * kF;
    for (int64_t i = 0; i < kF; ++i) {
      tile[face * kF + i] = static_cast<uint8_t>(EncodeBlock<B>(bits + (k0 + i) * kT + n0, c));
      if constexpr (B == 7) {
        uint8_t* out = codes + (face * kF + i) * kF;  // [16] one byte a code
        for (int j = 0; j < kBlock; ++j) out[j] = static_cast<uint8_t>(c[j]);
      } else {
        uint8_t* out = codes + (face * kF + i) * (kF / 2);  // [8] two codes a byte
        for (int j = 0; j < kBlock; j += 2) out[j / 2] = static_cast<uint8_t>(c[j] | c[j + 1] << 4);
      }
    }
  }
}

void PackTile(int magnitude_bits, const uint32_t* bits, uint8_t* tile) {
  if (magnitude_bits == 7) return PackTileB<7>(bits, tile);
  PackTileB<3>(bits, tile);
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(PackTile);

namespace {

constexpr int64_t kTile = kBfpTileDim, kFace = kBfpFaceDim;
constexpr uint32_t kExpMask = 0x7f800000u;

inline uint32_t ExponentField(uint32_t bits) {
  return (bits >> 23) & 0xffu;
}

// Steps 2-5 for B magnitude bits (see the header), without branches (random weights would
// mispredict the rounding and zero tests: 2x slower).
template <int B>
inline uint8_t Encode(uint32_t bits, uint32_t shared_exp) {
  constexpr uint32_t kShift = 24 - B, kHalf = 1u << (kShift - 1), kRest = (1u << kShift) - 1;
  constexpr uint32_t kMax = (1u << B) - 1;
  const uint32_t e = ExponentField(bits);
  const uint32_t down = shared_exp - e;
  uint32_t m = (0x800000u | (bits & 0x7fffffu)) >> (down & 31);
  // Zero or float32 denormal (tt-metal: only +-0; see the header), or shifted 32 or more: 0.
  m = (e != 0) & (down < 32) ? m : 0;
  uint32_t q = m >> kShift;
  const uint32_t r = m & kRest;
  q += static_cast<uint32_t>(r > kHalf) | (static_cast<uint32_t>(r == kHalf) & q);  // ties to even
  q = std::min(q, kMax);
  const uint32_t sign = q != 0 ? (bits >> 31) << B : 0;  // no negative zero
  return static_cast<uint8_t>(sign | q);
}

// The float32 bits of (-1)^sign * q * 2^(E - 127 - (B - 1)), built with integers so the result is
// exact whatever the FPU's denormal modes.
inline uint32_t DecodeBits(int b, uint32_t code, uint32_t shared_exp) {
  const uint32_t q = code & ((1u << b) - 1);
  if (q == 0) return 0;
  const uint32_t sign = ((code >> b) & 1u) << 31;
  const int msb = 31 - __builtin_clz(q);
  const int biased = static_cast<int>(shared_exp) - (b - 1) + msb;  // exponent field of a normal
  if (biased >= 1)
    return sign | static_cast<uint32_t>(biased) << 23 | ((q << (23 - msb)) & 0x7fffffu);
  // Subnormal: value = q * 2^(E - 127 - (B - 1)) = (q << (E + 23 - B)) * 2^-149, E + 23 - B >= 16.
  return sign | q << (static_cast<int>(shared_exp) + 23 - b);
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// out[0:n] = float32 bits of W[r, c0 : c0 + n].
void LoadRowBits(const MatrixRef& w, int64_t r, int64_t c0, int64_t n, uint32_t* out) {
  const int64_t esize = DTypeSize(w.dtype);
  const auto* src = static_cast<const uint8_t*>(w.data) + (r * w.row_stride + c0) * esize;
  switch (w.dtype) {
    case DType::kF32:
      std::memcpy(out, src, static_cast<size_t>(n) * 4);
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = static_cast<uint32_t>(h) << 16;
      }
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        const float f = F16ToF32(h);
        std::memcpy(&out[i], &f, 4);
      }
      break;
  }
}

}  // namespace

// bits [32 k][32 n] = tile (tk, tn) of the transposed, zero-padded W. Throws on a non-finite value.
void GatherBfpTile(const MatrixRef& w, const std::string& name, int64_t tk, int64_t tn,
                   uint32_t* bits) {
  const int64_t k0 = tk * kTile, n0 = tn * kTile;
  const int64_t kn = std::clamp<int64_t>(w.cols - k0, 0, kTile);
  const int64_t nn = std::clamp<int64_t>(w.rows - n0, 0, kTile);
  std::memset(bits, 0, sizeof(uint32_t) * kTile * kTile);
  uint32_t row[kTile];  // [kn] W[n0 + j, k0 : k0 + kn]
  for (int64_t j = 0; j < nn; ++j) {
    LoadRowBits(w, n0 + j, k0, kn, row);
    for (int64_t i = 0; i < kn; ++i) {
      if ((row[i] & kExpMask) == kExpMask)
        throw Error(Cat(name, ": weight [", n0 + j, ", ", k0 + i, "] is ", BitsToFloat(row[i]),
                        "; block-float (bfp8/bfp4) weights must be finite"));
      bits[i * kTile + j] = row[i];
    }
  }
}

const char* BfpFormatName(BfpFormat f) {
  return f == BfpFormat::kBfp8 ? "bfp8" : "bfp4";
}

std::optional<BfpFormat> BfpFormatFromName(std::string_view name) {
  if (name == "bfp8") return BfpFormat::kBfp8;
  if (name == "bfp4") return BfpFormat::kBfp4;
  return std::nullopt;
}

uint8_t BfpSharedExponent(const uint32_t* bits) {
  uint32_t e = 0;
  for (int64_t j = 0; j < kFace; ++j) e = std::max(e, ExponentField(bits[j]));
  return static_cast<uint8_t>(e);
}

uint8_t BfpEncode(BfpFormat f, uint32_t bits, uint32_t shared_exp) {
  return f == BfpFormat::kBfp8 ? Encode<7>(bits, shared_exp) : Encode<3>(bits, shared_exp);
}

float BfpDecode(BfpFormat f, uint8_t code, uint8_t shared_exp) {
  return BitsToFloat(DecodeBits(BfpMagnitudeBits(f), code, shared_exp));
}

uint16_t BfpDecodeBF16(BfpFormat f, uint8_t code, uint8_t shared_exp) {
  // The low 16 bits are zero: q has at most 7 significant bits.
  return static_cast<uint16_t>(DecodeBits(BfpMagnitudeBits(f), code, shared_exp) >> 16);
}

void PackBfpTile(BfpFormat f, const uint32_t* bits, uint8_t* tile) {
  HWY_DYNAMIC_DISPATCH(PackTile)(BfpMagnitudeBits(f), bits, tile);
}

void UnpackBfpTile(BfpFormat f, const uint8_t* tile, float* values) {
  const int b = BfpMagnitudeBits(f);
  const uint8_t* codes = tile + kBfpExponentBytes;
  for (int64_t face = 0; face < 4; ++face) {
    const int64_t k0 = (face / 2) * kFace, n0 = (face % 2) * kFace;
    for (int64_t i = 0; i < kFace; ++i) {
      const uint8_t e = tile[face * kFace + i];
      float* out = values + (k0 + i) * kTile + n0;  // [16] one face row
      const int64_t row = face * kFace + i;
      for (int64_t j = 0; j < kFace; ++j) {
        const uint32_t code = f == BfpFormat::kBfp8
                                  ? codes[row * kFace + j]
                                  : (codes[row * (kFace / 2) + j / 2] >> (4 * (j % 2))) & 0xfu;
        out[j] = BitsToFloat(DecodeBits(b, code, e));
      }
    }
  }
}

void PackBfpTiles(BfpFormat f, const MatrixRef& w, const std::string& name, int64_t tk_begin,
                  int64_t tk_end, int64_t tn_begin, int64_t tn_end, uint8_t* packed) {
  const BfpLayout layout{f, w.rows, w.cols};
  WC_CHECK(w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kF16,
           "bad dtype");
  WC_CHECK(w.rows >= 0 && w.cols >= 0 && w.row_stride >= w.cols, "bad matrix shape");
  WC_CHECK(0 <= tk_begin && tk_begin <= tk_end && tk_end <= layout.k_tiles() && 0 <= tn_begin &&
               tn_begin <= tn_end && tn_end <= layout.n_tiles(),
           "tile range out of the matrix");
  uint32_t bits[kTile * kTile];  // [32 k][32 n] one tile's values
  // Tile columns outermost: their 32 source rows stay in cache across the tile row.
  for (int64_t tn = tn_begin; tn < tn_end; ++tn) {
    for (int64_t tk = tk_begin; tk < tk_end; ++tk) {
      GatherBfpTile(w, name, tk, tn, bits);
      PackBfpTile(f, bits, packed + layout.TileOffset(tk, tn));
    }
  }
}

void PackBfpMatrix(BfpFormat f, const MatrixRef& w, const std::string& name, uint8_t* packed,
                   const BfpRowsDone& done) {
  const BfpLayout layout{f, w.rows, w.cols};
  const int64_t n_tiles = layout.n_tiles(), k_tiles = layout.k_tiles();
  // Blocks of about 8 MiB of source rows, so `done` can release a large matrix while it is packed.
  const int64_t row_bytes = std::max<int64_t>(1, w.row_stride * DTypeSize(w.dtype));
  const int64_t block = std::max<int64_t>(1, (int64_t{8} << 20) / (kTile * row_bytes));
  for (int64_t tn0 = 0; tn0 < n_tiles; tn0 += block) {
    const int64_t tn1 = std::min(n_tiles, tn0 + block);
    // An exception must not leave an OpenMP region: the first failing tile column's (the lowest
    // tn, whatever the thread count) is rethrown after it.
    int64_t bad_tn = tn1;
    std::string bad_what;
#pragma omp parallel for schedule(static)
    for (int64_t tn = tn0; tn < tn1; ++tn) {
      try {
        PackBfpTiles(f, w, name, 0, k_tiles, tn, tn + 1, packed);
      } catch (const Error& e) {
#pragma omp critical(wc_bfp_pack_error)
        if (tn < bad_tn) {
          bad_tn = tn;
          bad_what = e.what();
        }
      }
    }
    if (bad_tn < tn1) throw Error(bad_what);
    if (done) done(tn0 * kTile, std::min(w.rows, tn1 * kTile));
  }
}

void DequantizeBfpMatrix(const BfpLayout& layout, const uint8_t* packed, float* w) {
  const int64_t n_tiles = layout.n_tiles(), k_tiles = layout.k_tiles();
#pragma omp parallel for schedule(static)
  for (int64_t tn = 0; tn < n_tiles; ++tn) {
    float values[kTile * kTile];  // [32 k][32 n] one tile
    const int64_t n0 = tn * kTile, nn = std::min(kTile, layout.out - n0);
    for (int64_t tk = 0; tk < k_tiles; ++tk) {
      UnpackBfpTile(layout.format, packed + layout.TileOffset(tk, tn), values);
      const int64_t k0 = tk * kTile, kn = std::min(kTile, layout.in - k0);
      for (int64_t j = 0; j < nn; ++j)
        for (int64_t i = 0; i < kn; ++i) w[(n0 + j) * layout.in + k0 + i] = values[i * kTile + j];
    }
  }
}

}  // namespace wc
#endif  // HWY_ONCE
