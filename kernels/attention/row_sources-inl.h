// Row sources of the portable decode-attention kernels, per SIMD target: stored rows
// of every KV-cache format (kv_rows.h) as f32 vectors. Vec(df, r, c) loads lanes [c, c + lanes)
// of row r, At(r, c) one value (for tails); scaled formats (kScaled) give their codes unscaled and
// Scale(r) the row's multiplier; `ahead` prefetches the source's own rows. WithRows(m, fn) calls fn
// with the source of m's format. A Highway per-target header: included once per target by the
// portable kernels' foreach_target (decode_attention_scores_*.cpp, decode_attention_weighted.cpp).
//
// Alignment: none is assumed. Rows may start at any byte (matmul.h: a view into a memory-mapped
// checkpoint; the kernels' tests place rows one byte off on purpose), so vectors are read with
// LoadU and single values with memcpy (LoadScalar), never through a typed pointer.

// Include guard toggled per target (Highway's -inl.h convention).
#if defined(WC_KERNELS_ROW_SOURCES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WC_KERNELS_ROW_SOURCES_INL_H_
#undef WC_KERNELS_ROW_SOURCES_INL_H_
#else
#define WC_KERNELS_ROW_SOURCES_INL_H_
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/attention/kv_rows.h"
#include "kernels/attention/prefetch_stream.h"
#include "util/bf16.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// The T at p, which need not be aligned for T (the same value a typed load would give).
template <typename T>
HWY_INLINE T LoadScalar(const T* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Loads of N consecutive 16-bit values as f32 lanes, and the scalar equivalent for tails.
HWY_INLINE VF LoadHalf(DF df, const uint16_t* p, DType dtype) {
  if (dtype == DType::kBF16) {
    const hn::RebindToUnsigned<DF> du32;
    const hn::Rebind<uint16_t, DF> du16;
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
  }
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}
HWY_INLINE float Scalar(const uint16_t* p, DType dtype) {
  const uint16_t bits = LoadScalar(p);
  return dtype == DType::kBF16 ? BF16ToF32(bits) : F16ToF32(bits);
}

// A row source: F32 rows, or 16-bit rows of one dtype.
struct F32Rows {
  static constexpr bool kScaled = false;
  const float* base;
  int64_t stride;
  PrefetchStream ahead;
  HWY_INLINE VF Vec(DF df, int64_t r, int64_t c) const {
    return hn::LoadU(df, base + r * stride + c);
  }
  HWY_INLINE float At(int64_t r, int64_t c) const { return LoadScalar(base + r * stride + c); }
};
template <DType kDType>
struct Half16Rows {
  static constexpr bool kScaled = false;
  const uint16_t* base;
  int64_t stride;
  PrefetchStream ahead;
  HWY_INLINE VF Vec(DF df, int64_t r, int64_t c) const {
    return LoadHalf(df, base + r * stride + c, kDType);
  }
  HWY_INLINE float At(int64_t r, int64_t c) const { return Scalar(base + r * stride + c, kDType); }
};

// int8 / fp8 codes as f32 lanes before scaling (E4M3 is read through its f16 bit pattern, which
// is its value times 2^-8: kCodeFactor folds that back into the scale), and the scalar equivalent.
template <RowFormat kFormat>
constexpr float kCodeFactor = kFormat == RowFormat::kFP8E4M3 ? 256.0f : 1.0f;
template <RowFormat kFormat>
HWY_INLINE uint16_t CodeToF16Bits(uint8_t b) {
  if (kFormat == RowFormat::kFP8E5M2) return static_cast<uint16_t>(b << 8);  // E5M2 = f16's top
  return static_cast<uint16_t>((b & 0x80) << 8 | (b & 0x7f) << 7);
}
template <RowFormat kFormat>
HWY_INLINE float CodeValue(uint8_t b) {
  if (kFormat == RowFormat::kInt8) return static_cast<float>(static_cast<int8_t>(b));
  return F16ToF32(CodeToF16Bits<kFormat>(b));
}

// Rows of one-byte codes (int8, fp8) with a bf16 scale leading each row (kRowScale) or one
// tensor scale. Vec/At give the unscaled code values; Scale(r) the multiplier of row r.
template <RowFormat kFormat, bool kRowScale>
struct CodeRows {
  static constexpr bool kScaled = true;
  static constexpr int64_t kCodes = kRowScale ? 2 : 0;  // byte offset of the codes in a row
  const uint8_t* base;
  int64_t stride;      // bytes
  float tensor_scale;  // already times kCodeFactor
  PrefetchStream ahead;
  HWY_INLINE VF Vec(DF df, int64_t r, int64_t c) const {
    const uint8_t* p = base + r * stride + kCodes + c;
    if constexpr (kFormat == RowFormat::kInt8) {
      const hn::Rebind<int8_t, DF> d8;
      const hn::RebindToSigned<DF> di;
      return hn::ConvertTo(df,
                           hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(p))));
    } else {
      const hn::Rebind<uint8_t, DF> d8;
      const hn::Rebind<uint16_t, DF> d16;
      const hn::Rebind<hwy::float16_t, DF> dh;
      const auto b = hn::PromoteTo(d16, hn::LoadU(d8, p));
      if constexpr (kFormat == RowFormat::kFP8E5M2) {
        return hn::PromoteTo(df, hn::BitCast(dh, hn::ShiftLeft<8>(b)));
      } else {
        const auto bits = hn::Or(hn::ShiftLeft<8>(hn::And(b, hn::Set(d16, 0x80))),
                                 hn::ShiftLeft<7>(hn::And(b, hn::Set(d16, 0x7f))));
        return hn::PromoteTo(df, hn::BitCast(dh, bits));
      }
    }
  }
  HWY_INLINE float At(int64_t r, int64_t c) const {
    return CodeValue<kFormat>(base[r * stride + kCodes + c]);
  }
  HWY_INLINE float Scale(int64_t r) const {
    if constexpr (kRowScale) {
      uint16_t s;
      std::memcpy(&s, base + r * stride, 2);
      return BF16ToF32(s) * kCodeFactor<kFormat>;
    } else {
      return tensor_scale;
    }
  }
};

// 2^(e - 133): the value of magnitude 1 in a BFP8_B block with shared exponent e (0 for e = 0).
HWY_INLINE float Bfp8Quantum(uint8_t e) {
  if (e >= 7) {
    const uint32_t bits = static_cast<uint32_t>(e - 6) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return e == 0 ? 0.0f : std::ldexp(1.0f, static_cast<int>(e) - 133);
}

// BFP8_B rows: per row, cols / 16 shared exponents then cols sign-magnitude bytes. Vec/At give
// the values (a vector never straddles two 16-value blocks where lanes divide 16 - every x86
// target; wider vectors are filled lane by lane).
struct Bfp8Rows {
  static constexpr bool kScaled = false;
  const uint8_t* base;
  int64_t stride;  // bytes
  int64_t blocks;  // cols / 16
  PrefetchStream ahead;
  HWY_INLINE VF Vec(DF df, int64_t r, int64_t c) const {
    const uint8_t* row = base + r * stride;
    const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
    if (nl > 16) {
      HWY_ALIGN float lanes[HWY_MAX_BYTES / sizeof(float)];
      for (int64_t i = 0; i < nl; ++i) lanes[i] = At(r, c + i);
      return hn::Load(df, lanes);
    }
    const hn::Rebind<uint8_t, DF> d8;
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const auto code = hn::PromoteTo(du, hn::LoadU(d8, row + blocks + c));
    const VF mag = hn::ConvertTo(df, hn::BitCast(di, hn::And(code, hn::Set(du, 0x7fu))));
    const VF value =
        hn::Or(mag, hn::BitCast(df, hn::ShiftLeft<24>(hn::And(code, hn::Set(du, 0x80u)))));
    return hn::Mul(value, hn::Set(df, Bfp8Quantum(row[c / 16])));
  }
  HWY_INLINE float At(int64_t r, int64_t c) const {
    const uint8_t* row = base + r * stride;
    const uint8_t code = row[blocks + c];
    const float mag = static_cast<float>(code & 0x7f);
    return ((code & 0x80) ? -mag : mag) * Bfp8Quantum(row[c / 16]);
  }
};

template <RowFormat kFormat, class Fn>
HWY_INLINE void WithCodeRows(const RowsRef& m, const Fn& fn) {
  const float ts = m.tensor_scale * kCodeFactor<kFormat>;
  const PrefetchStream ahead(m);
  if (m.row_scale) return fn(CodeRows<kFormat, true>{m.data, m.row_bytes, ts, ahead});
  return fn(CodeRows<kFormat, false>{m.data, m.row_bytes, ts, ahead});
}

// Whether WithRows<kOnly...> takes rows of kFormat: any format when kOnly is empty.
template <RowFormat kFormat, RowFormat... kOnly>
constexpr bool kRowsWanted = sizeof...(kOnly) == 0 || ((kFormat == kOnly) || ...);

// Calls fn(rows) with the row source of m's format - with kOnly, only for those formats (another
// does nothing), so that a kernel split by format (decode_attention_scores_*.cpp) instantiates fn
// for its own formats alone.
template <RowFormat... kOnly, class Fn>
HWY_INLINE void WithRows(const RowsRef& m, const Fn& fn) {
  switch (m.format) {
    case RowFormat::kF32:
      if constexpr (kRowsWanted<RowFormat::kF32, kOnly...>)
        fn(F32Rows{reinterpret_cast<const float*>(m.data), m.row_bytes / 4, PrefetchStream(m)});
      return;
    case RowFormat::kBF16:
      if constexpr (kRowsWanted<RowFormat::kBF16, kOnly...>)
        fn(Half16Rows<DType::kBF16>{reinterpret_cast<const uint16_t*>(m.data), m.row_bytes / 2,
                                    PrefetchStream(m)});
      return;
    case RowFormat::kF16:
      if constexpr (kRowsWanted<RowFormat::kF16, kOnly...>)
        fn(Half16Rows<DType::kF16>{reinterpret_cast<const uint16_t*>(m.data), m.row_bytes / 2,
                                   PrefetchStream(m)});
      return;
    case RowFormat::kInt8:
      if constexpr (kRowsWanted<RowFormat::kInt8, kOnly...>) WithCodeRows<RowFormat::kInt8>(m, fn);
      return;
    case RowFormat::kFP8E4M3:
      if constexpr (kRowsWanted<RowFormat::kFP8E4M3, kOnly...>)
        WithCodeRows<RowFormat::kFP8E4M3>(m, fn);
      return;
    case RowFormat::kFP8E5M2:
      if constexpr (kRowsWanted<RowFormat::kFP8E5M2, kOnly...>)
        WithCodeRows<RowFormat::kFP8E5M2>(m, fn);
      return;
    case RowFormat::kBFP8:
      if constexpr (kRowsWanted<RowFormat::kBFP8, kOnly...>)
        fn(Bfp8Rows{m.data, m.row_bytes, m.cols / 16, PrefetchStream(m)});
      return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#endif  // WC_KERNELS_ROW_SOURCES_INL_H_
