// Scalar conversions between float and the 16-bit float formats stored in checkpoints and caches.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace wc {

// Round-to-nearest-even float -> bfloat16 (upper 16 bits); NaN stays NaN.
inline uint16_t F32ToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// An activation as the BF16 GEMMs round it (gemm_amx.h's contract): nearest even, an f32
// subnormal zero of its sign - what vcvtne2ps2bf16 gives (DAZ; a normal float never rounds to a
// bf16 subnormal), so no kernel sees a subnormal.
inline uint16_t ActivationToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);
  return F32ToBF16(f);
}

inline float BF16ToF32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE half -> float (handles subnormals, inf, NaN).
inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | mant << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round-to-nearest-even float -> IEEE half; overflow becomes inf, NaN stays NaN.
inline uint16_t F32ToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: inf
  if (u < 0x38800000u) {                        // below 2^-14: subnormal half (or zero)
    float a;
    std::memcpy(&a, &u, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t r = u + 0xfffu + ((u >> 13) & 1u);
  r -= (127u - 15u) << 23;
  return sign | static_cast<uint16_t>(r >> 13);
}

}  // namespace wc
