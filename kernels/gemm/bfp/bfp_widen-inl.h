// Block-float weight codes (gemm_bfp.h's panel layout) widened in registers to their exact f32
// values: the pieces every portable block-float tile shares (gemm_bfp.cpp's tiles and panel
// widening, gemm_bfp_row_groups.cpp's row-group tiles). A Highway per-target header: include it
// after hwy/highway.h in a file compiled through foreach_target.
//
// A code's value is its signed magnitude q (a two's-complement int8 for bfp8, nibble for bfp4)
// times its block's unit 2^(E - 127 - (B - 1)), B = 7 (bfp8) or 3 (bfp4): exact in f32, or under
// FTZ (the BF16 GEMM's order) a bf16 subnormal flushed to zero of its sign, as the BF16 panels'
// packer flushes it.

// Include guard toggled per target (Highway's -inl.h convention).
#if defined(WC_KERNELS_BFP_WIDEN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WC_KERNELS_BFP_WIDEN_INL_H_
#undef WC_KERNELS_BFP_WIDEN_INL_H_
#else
#define WC_KERNELS_BFP_WIDEN_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace bfp {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;
using VI = hn::Vec<DI>;

// 2^(E - 127 - (B - 1)), the unit of a block of exponent E: a normal or, for E < B, a float32
// subnormal, exact either way.
inline float BlockUnit(int b, uint32_t e) {
  const int field = static_cast<int>(e) - (b - 1);
  const uint32_t bits = field >= 1 ? static_cast<uint32_t>(field) << 23 : 1u << (field + 22);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// BlockUnit of every exponent byte, for B (7 or 3).
struct BlockUnits {
  float of[256];
  explicit BlockUnits(int b) {
    for (int e = 0; e < 256; ++e) of[e] = BlockUnit(b, static_cast<uint32_t>(e));
  }
};
inline const BlockUnits& BlockUnitsOf(int b) {
  static const BlockUnits bfp8(7), bfp4(3);
  return b == 7 ? bfp8 : bfp4;
}

// BlockUnit of each of a tile's 64 exponent bytes, in their order (byte 4 kp + 2 h + b is the
// block of k = 2 kp + b, half h): a vector per kLanes bytes instead of a table lookup per byte.
//   e: the tile's [64] exponent bytes; unit: [64] f32.
template <int B>
HWY_INLINE void TileUnits(const uint8_t* HWY_RESTRICT e, float* HWY_RESTRICT unit) {
  const DF df;
  const DI di;
  const hn::Rebind<uint8_t, DI> d8;
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(df));
  for (int i = 0; i < 64; i += kLanes) {
    const VI field =
        hn::Sub(hn::BitCast(di, hn::PromoteTo(DU(), hn::LoadU(d8, e + i))), hn::Set(di, B - 1));
    const VI normal = hn::ShiftLeft<23>(field);
    // field + 22 >= 16; capped at 22 where the lane is a normal's (unused there, and a shift past
    // 31 is undefined on the scalar target).
    const VI tiny =
        hn::Shl(hn::Set(di, 1), hn::Min(hn::Add(field, hn::Set(di, 22)), hn::Set(di, 22)));
    hn::Store(hn::BitCast(df, hn::IfThenElse(hn::Gt(field, hn::Zero(di)), normal, tiny)), df,
              unit + i);
  }
}

// The row-group tiles' widening (gemm_bfp_row_groups.cpp), with no conversion or multiply on the
// FMA ports: a block's base = 1.5 * 2^23 * unit is a normal whose last mantissa bit is worth one
// unit, so the code q (|q| <= 127) added to base's bits is the float base + q * unit, in base's
// binade, and subtracting base leaves q * unit exactly (Sterbenz): the product Widen8 / Widen4
// form, for every exponent byte E < 255 (a subnormal unit included), and under FTZ flushed to
// zero of its sign where that product is flushed; q = 0 gives +0 as 0 * unit does.
constexpr float kBlockBaseScale = 12582912.0f;  // 1.5 * 2^23

// TileUnits times kBlockBaseScale (exact): the tile's 64 bases, in exponent byte order.
template <int B>
HWY_INLINE void TileBases(const uint8_t* HWY_RESTRICT e, float* HWY_RESTRICT base) {
  const DF df;
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(df));
  TileUnits<B>(e, base);
  for (int i = 0; i < 64; i += kLanes)
    hn::Store(hn::Mul(hn::Load(df, base + i), hn::Set(df, kBlockBaseScale)), df, base + i);
}

// q (sign-extended codes) as their values, given their block's base.
HWY_INLINE VF WidenByBase(VI q, VF base) {
  const DF df;
  return hn::Sub(hn::BitCast(df, hn::Add(q, hn::BitCast(DI(), base))), base);
}

// bfp8 / bfp4 as Widen8 / Widen4, through WidenByBase.
HWY_INLINE VF Widen8ByBase(const uint8_t* HWY_RESTRICT codes, VF base) {
  const hn::Rebind<int8_t, DI> d8;
  return WidenByBase(hn::PromoteTo(DI(), hn::LoadU(d8, reinterpret_cast<const int8_t*>(codes))),
                     base);
}
HWY_INLINE VF Widen4ByBase(VU lanes, int bit, VF base) {
  return WidenByBase(hn::ShiftRightSame(hn::ShiftLeftSame(hn::BitCast(DI(), lanes), 28 - bit), 28),
                     base);
}

// bfp4: the code at bit `bit` of every lane (gemm_bfp.h: a two's-complement nibble) as its value:
// sign-extended by two shifts, converted exactly, times the unit (exact, or flushed to zero of its
// sign under FTZ).
// kScaled: the bare code value (the one-token tile's scaled activations carry the unit).
template <bool kScaled = false>
HWY_INLINE VF Widen4(VU lanes, int bit, VF unit) {
  const DF df;
  const VI v = hn::ShiftRightSame(hn::ShiftLeftSame(hn::BitCast(DI(), lanes), 28 - bit), 28);
  if constexpr (kScaled) return hn::ConvertTo(df, v);
  return hn::Mul(hn::ConvertTo(df, v), unit);
}

// bfp8: kLanes codes of one row (gemm_bfp.h: two's-complement int8) as their values: sign-extended,
// converted exactly, times the unit (exact, or flushed to zero of its sign under FTZ).
template <bool kScaled = false>
HWY_INLINE VF Widen8(const uint8_t* HWY_RESTRICT codes, VF unit) {
  const DF df;
  const DI di;
  const hn::Rebind<int8_t, DI> d8;
  const auto v = hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(codes)));
  if constexpr (kScaled) return hn::ConvertTo(df, v);
  return hn::Mul(hn::ConvertTo(df, v), unit);
}

}  // namespace bfp
}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#endif  // WC_KERNELS_BFP_WIDEN_INL_H_
