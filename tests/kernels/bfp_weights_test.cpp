// Block-float weight tiles (kernels/gemm/bfp/bfp_weights.h): the six packing steps of issue 30 on
// hand-made blocks with codes worked out by hand, the tile byte layout on a matrix whose every
// value names its (k, n), padding of odd shapes, exact decoding, dequantize(pack(W)) against the
// format's bound, refusal of non-finite weights, and identical bytes however the packing is split.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "kernels/gemm/bfp/bfp_weights.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

constexpr BfpFormat k8 = BfpFormat::kBfp8, k4 = BfpFormat::kBfp4;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// 1.0f's exponent field.
constexpr uint32_t kOne = 127;

MatrixRef F32Ref(const std::vector<float>& w, int64_t out, int64_t in) {
  return MatrixRef{DType::kF32, out, in, in, w.data()};
}

std::vector<uint8_t> Pack(BfpFormat f, const MatrixRef& w, const std::string& name = "w") {
  std::vector<uint8_t> packed(static_cast<size_t>(BfpLayout{f, w.rows, w.cols}.bytes()), 0xAB);
  PackBfpMatrix(f, w, name, packed.data());
  return packed;
}

std::vector<float> Dequantize(BfpFormat f, const std::vector<uint8_t>& packed, int64_t out,
                              int64_t in) {
  std::vector<float> w(static_cast<size_t>(out * in));  // [out, in]
  DequantizeBfpMatrix(BfpLayout{f, out, in}, packed.data(), w.data());
  return w;
}

std::vector<float> RandomMatrix(int64_t out, int64_t in, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> w(static_cast<size_t>(out * in));  // [out, in]
  for (auto& x : w) x = scale * static_cast<float>(rng.Uniform() * 2.0 - 1.0);
  return w;
}

TEST(BfpFormatTest, Constants) {
  EXPECT_EQ(BfpMagnitudeBits(k8), 7);
  EXPECT_EQ(BfpMagnitudeBits(k4), 3);
  EXPECT_EQ(BfpTileBytes(k8), 1088);
  EXPECT_EQ(BfpTileBytes(k4), 576);
  EXPECT_STREQ(BfpFormatName(k8), "bfp8");
  EXPECT_STREQ(BfpFormatName(k4), "bfp4");
  EXPECT_EQ(BfpFormatFromName("bfp8"), k8);
  EXPECT_EQ(BfpFormatFromName("bfp4"), k4);
  EXPECT_FALSE(BfpFormatFromName("BFP8").has_value());
  EXPECT_FALSE(BfpFormatFromName("bf16").has_value());
  const BfpLayout l{k4, 33, 70};  // [out, in] -> 3 x 2 tiles
  EXPECT_EQ(l.k_tiles(), 3);
  EXPECT_EQ(l.n_tiles(), 2);
  EXPECT_EQ(l.bytes(), 6 * 576);
  EXPECT_EQ(l.TileOffset(1, 1), 3 * 576);
}

// Step 1: E is the largest exponent field; zeros and denormals count 0.
TEST(BfpEncodeTest, SharedExponent) {
  uint32_t block[16] = {};
  EXPECT_EQ(BfpSharedExponent(block), 0);  // all zero
  block[3] = 0x00000001u;                  // smallest denormal
  block[9] = 0x807fffffu;                  // largest negative denormal
  EXPECT_EQ(BfpSharedExponent(block), 0);
  block[4] = Bits(-0.25f);
  block[15] = Bits(3.0f);
  block[0] = Bits(1.0f);
  EXPECT_EQ(BfpSharedExponent(block), 128);
  block[7] = Bits(-1e30f);
  EXPECT_EQ(BfpSharedExponent(block), (Bits(1e30f) >> 23) & 0xff);
}

// Steps 2-5 on values whose codes are worked out by hand (comments: M, q, r).
TEST(BfpEncodeTest, ExactValues) {
  EXPECT_EQ(BfpEncode(k8, Bits(1.0f), kOne), 0x40);   // M 0x800000, q 64
  EXPECT_EQ(BfpEncode(k8, Bits(-1.0f), kOne), 0xC0);  // sign 1 << 7 | 64
  EXPECT_EQ(BfpEncode(k8, Bits(1.5f), kOne), 96);
  EXPECT_EQ(BfpEncode(k8, Bits(1.0f), kOne + 1), 32);  // one shift down
  EXPECT_EQ(BfpEncode(k4, Bits(1.0f), kOne), 4);       // q = 0x800000 >> 21
  EXPECT_EQ(BfpEncode(k4, Bits(-1.0f), kOne), 0xC);    // 1 << 3 | 4
  EXPECT_EQ(BfpEncode(k4, Bits(-1.5f), kOne), 0xE);
  // 0.3f = 0x3e99999a: M 0x99999a; bfp8 q 76, r 0x1999a > 0x10000 -> 77; bfp4 q 4, r 0x19999a >
  // 0x100000 -> 5.
  EXPECT_EQ(BfpEncode(k8, Bits(0.3f), 125), 77);
  EXPECT_EQ(BfpEncode(k4, Bits(0.3f), 125), 5);
}

TEST(BfpEncodeTest, TiesRoundToEvenBothWays) {
  // bfp8, E = 127: 2^-7 is half a unit (r = 0x10000 = 2^(S-1), S = 17).
  EXPECT_EQ(BfpEncode(k8, Bits(1.0f + 0x1p-7f), kOne), 64);                       // q 64 even: down
  EXPECT_EQ(BfpEncode(k8, Bits(1.0f + 0x1p-6f + 0x1p-7f), kOne), 66);             // q 65 odd: up
  EXPECT_EQ(BfpEncode(k8, Bits(1.0f + 0x1p-7f + 0x1p-23f), kOne), 65);            // above the tie
  EXPECT_EQ(BfpEncode(k8, Bits(1.0f + 0x1p-6f + 0x1p-7f - 0x1p-23f), kOne), 65);  // below
  EXPECT_EQ(BfpEncode(k8, Bits(-(1.0f + 0x1p-6f + 0x1p-7f)), kOne), 0x80 | 66);
  // bfp4, E = 127: 2^-3 is half a unit (S = 21).
  EXPECT_EQ(BfpEncode(k4, Bits(1.125f), kOne), 4);  // q 4 even: down
  EXPECT_EQ(BfpEncode(k4, Bits(1.375f), kOne), 6);  // q 5 odd: up
  EXPECT_EQ(BfpEncode(k4, Bits(-1.375f), kOne), 0xE);
  // Ties after the shift: E = 127, 2^-7 (e 120, M >> 7 = 0x10000): q 0, tie, even -> 0;
  // 3 * 2^-7 (e 121, M 0xc00000 >> 6 = 0x30000): q 1, tie, odd -> 2; 3 * 2^-8: q 0, r 0x18000 -> 1.
  EXPECT_EQ(BfpEncode(k8, Bits(0x1p-7f), kOne), 0);
  EXPECT_EQ(BfpEncode(k8, Bits(3 * 0x1p-7f), kOne), 2);
  EXPECT_EQ(BfpEncode(k8, Bits(3 * 0x1p-8f), kOne), 1);
}

TEST(BfpEncodeTest, SaturatesWithoutCarryIntoTheExponent) {
  const float top = FromBits(0x3fffffffu);  // 2 - 2^-23: M 0xffffff rounds to 2^B
  EXPECT_EQ(BfpEncode(k8, Bits(top), kOne), 127);
  EXPECT_EQ(BfpEncode(k8, Bits(-top), kOne), 0xFF);
  EXPECT_EQ(BfpEncode(k4, Bits(top), kOne), 7);
  EXPECT_EQ(BfpEncode(k4, Bits(-top), kOne), 0xF);
  // Units of 2^-6 (bfp8) and 2^-2 (bfp4) at E = 127: odd ties round up to 2^B and saturate, even
  // ties stay.
  EXPECT_EQ(BfpEncode(k8, Bits(127.5f / 64), kOne), 127);
  EXPECT_EQ(BfpEncode(k8, Bits(126.5f / 64), kOne), 126);
  EXPECT_EQ(BfpEncode(k4, Bits(7.5f / 4), kOne), 7);
  EXPECT_EQ(BfpEncode(k4, Bits(6.5f / 4), kOne), 6);

  // In a tile: the block's E stays the largest value's exponent field.
  std::vector<uint32_t> tile(32 * 32, 0);  // [32 k][32 n]
  tile[5] = Bits(top);
  tile[6] = Bits(-0.5f);
  std::vector<uint8_t> bytes(1088);
  PackBfpTile(k8, tile.data(), bytes.data());
  EXPECT_EQ(bytes[0], kOne);
  EXPECT_EQ(bytes[64 + 5], 127);
  EXPECT_EQ(bytes[64 + 6], 0x80 | 32);
}

TEST(BfpEncodeTest, ZerosDenormalsAndFarBelowTheMax) {
  for (BfpFormat f : {k8, k4}) {
    EXPECT_EQ(BfpEncode(f, Bits(0.0f), kOne), 0);
    EXPECT_EQ(BfpEncode(f, Bits(-0.0f), kOne), 0);  // negative zero: sign cleared
    EXPECT_EQ(BfpEncode(f, Bits(-0.0f), 0), 0);
    EXPECT_EQ(BfpEncode(f, 0x00000001u, 0), 0);  // denormals encode as 0, even when E = 0
    EXPECT_EQ(BfpEncode(f, 0x807fffffu, 0), 0);
    EXPECT_EQ(BfpEncode(f, 0x007fffffu, kOne), 0);
    EXPECT_EQ(BfpEncode(f, Bits(-1e-30f), kOne), 0);    // rounds to q 0: sign cleared
    EXPECT_EQ(BfpEncode(f, Bits(1.0f), kOne + 20), 0);  // truncated away (shift 20)
    EXPECT_EQ(BfpEncode(f, Bits(1.0f), kOne + 40), 0);  // shift >= 32
    EXPECT_EQ(BfpEncode(f, Bits(-1.0f), 254), 0);       // shift 127
    EXPECT_EQ(BfpEncode(f, 0x00800000u, 254), 0);       // smallest normal: shift 253
  }
  // The shift truncates before rounding (step 3): bfp8, E = 127, unit 2^-6. 2^-7 (1 + 2^-23) is
  // above half a unit, but its last bit is shifted out (M 0x800001 >> 7 = 0x10000, a tie, q 0 even)
  // -> 0; 2^-7 (1 + 2^-16) keeps its bit (0x800080 >> 7 = 0x10001 > half) -> 1.
  EXPECT_EQ(BfpEncode(k8, Bits(0x1p-7f * (1.0f + 0x1p-23f)), kOne), 0);
  EXPECT_EQ(BfpEncode(k8, Bits(0x1p-7f * (1.0f + 0x1p-16f)), kOne), 1);
}

// Decoding: (-1)^sign * q * 2^(E - 127 - (B - 1)), exact, and exactly a bf16.
TEST(BfpDecodeTest, HandValues) {
  EXPECT_EQ(BfpDecode(k8, 0x40, 127), 1.0f);
  EXPECT_EQ(BfpDecode(k8, 0xC0, 127), -1.0f);
  EXPECT_EQ(BfpDecode(k8, 127, 127), 1.984375f);
  EXPECT_EQ(BfpDecode(k4, 7, 127), 1.75f);
  EXPECT_EQ(BfpDecode(k4, 0xF, 127), -1.75f);
  EXPECT_EQ(Bits(BfpDecode(k8, 0x80, 127)), 0u);  // a sign with q 0 decodes to +0
  EXPECT_EQ(BfpDecode(k8, 1, 0), std::ldexp(1.0f, -133));
  EXPECT_EQ(BfpDecode(k4, 1, 0), std::ldexp(1.0f, -129));
  EXPECT_EQ(BfpDecode(k8, 127, 254), std::ldexp(127.0f, 121));
  EXPECT_EQ(BfpDecodeBF16(k8, 0x40, 127), 0x3F80);
  EXPECT_EQ(BfpDecodeBF16(k8, 1, 0), 0x0001);  // 2^-133: the smallest bf16 subnormal
}

TEST(BfpDecodeTest, EveryCodeIsExactAndABf16) {
  for (BfpFormat f : {k8, k4}) {
    const int b = BfpMagnitudeBits(f);
    for (int e = 0; e < 255; ++e) {  // the packer never writes 255
      bool all_normal = true;
      for (int code = 0; code < (2 << b); ++code) {
        const int q = code & ((1 << b) - 1);
        const double want =
            (code >> b ? -1.0 : 1.0) * std::ldexp(static_cast<double>(q), e - 127 - (b - 1));
        const float got = BfpDecode(f, static_cast<uint8_t>(code), static_cast<uint8_t>(e));
        ASSERT_EQ(static_cast<double>(got), want)
            << BfpFormatName(f) << " code " << code << " E " << e;
        ASSERT_EQ(Bits(got) & 0xffffu, 0u);
        ASSERT_EQ(BfpDecodeBF16(f, static_cast<uint8_t>(code), static_cast<uint8_t>(e)),
                  Bits(got) >> 16);
        if (q == 0) continue;
        const int msb = 31 - __builtin_clz(static_cast<unsigned>(q));
        const bool normal = std::fpclassify(got) == FP_NORMAL;
        ASSERT_EQ(normal, e + msb >= b) << "code " << code << " E " << e;
        all_normal = all_normal && normal;
        // A normal decoded value encodes back to its code in a block of the same E.
        if (normal) {
          ASSERT_EQ(BfpEncode(f, Bits(got), static_cast<uint32_t>(e)), code);
        }
      }
      ASSERT_EQ(all_normal, BfpBlockIsBf16Normal(f, static_cast<uint8_t>(e))) << "E " << e;
    }
  }
}

// W [out = 64, in = 64] whose value at (k, n) is q(n) * 2^(E(k, n) - 127 - (B - 1)): the block of
// (k, n) has exponent E = 60 + k + 64 * (n / 32) (bfp8) and code sign(k, n) << B | q(n), so each
// byte of the packed tiles says where it came from.
bool Negative(int64_t k, int64_t n) {
  return (k + n) % 3 == 0;
}
int64_t LayoutExp(int64_t k, int64_t n) {
  return 60 + k + 64 * (n / 32);
}
int64_t LayoutQ(BfpFormat f, int64_t n) {
  return f == k8 ? 64 + n % 32 : 4 + n % 4;
}
int64_t LayoutCode(BfpFormat f, int64_t k, int64_t n) {
  return (Negative(k, n) ? 1 << BfpMagnitudeBits(f) : 0) | LayoutQ(f, n);
}
std::vector<float> MakeLayoutMatrix(BfpFormat f) {
  const int b = BfpMagnitudeBits(f);
  std::vector<float> w(64 * 64);  // [out][in]
  for (int64_t n = 0; n < 64; ++n)
    for (int64_t k = 0; k < 64; ++k)
      w[n * 64 + k] = (Negative(k, n) ? -1.0f : 1.0f) *
                      std::ldexp(static_cast<float>(LayoutQ(f, n)),
                                 static_cast<int>(LayoutExp(k, n)) - 127 - (b - 1));
  return w;
}

// PackBfpTile (vectors, every SIMD target) writes what the scalar steps write: BfpSharedExponent
// and BfpEncode of every value, in step 6's layout, on tiles built to hit every branch: ties
// both ways at every shift (few mantissa bits), saturation, zeros, negative zeros, denormals,
// values shifted out (32 or more below E), the largest exponent, and random bit patterns.
TEST(BfpEncodeTest, VectorTilesAreTheScalarEncoder) {
  Rng rng(77);
  std::vector<std::vector<uint32_t>> tiles;
  for (int t = 0; t < 64; ++t) {
    std::vector<uint32_t> bits(32 * 32);
    for (int64_t block = 0; block < 64; ++block) {
      const uint32_t top = t % 8 == 7 ? 254 : 1 + static_cast<uint32_t>(rng.Uniform() * 253);
      const uint32_t spread = static_cast<uint32_t>(rng.Uniform() * 40);
      for (int64_t j = 0; j < 16; ++j) {
        const double u = rng.Uniform();
        uint32_t e = top - std::min(top, static_cast<uint32_t>(rng.Uniform() * (spread + 1)));
        uint32_t mant = static_cast<uint32_t>(rng.Uniform() * (1u << 23));
        if (t % 2 == 0) mant &= 0x7f8000u;  // few bits: exact halves at many shifts
        if (u < 0.05) e = 0;                // zero or denormal
        if (u > 0.97) e = top;
        uint32_t v = (rng.Uniform() < 0.5 ? 0x80000000u : 0u) | e << 23 | mant;
        if (u > 0.05 && u < 0.07) v = 0x80000000u;  // -0
        bits[static_cast<size_t>((block / 16 / 2 * 16 + block % 16) * 32 + block / 16 % 2 * 16 +
                                 j)] = v;
      }
    }
    tiles.push_back(bits);
  }
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  for (BfpFormat f : {k8, k4}) {
    for (const auto& bits : tiles) {
      std::vector<uint8_t> want(static_cast<size_t>(BfpTileBytes(f)));
      for (int64_t face = 0; face < 4; ++face)
        for (int64_t i = 0; i < 16; ++i) {
          const uint32_t* block = bits.data() + (face / 2 * 16 + i) * 32 + face % 2 * 16;
          const uint8_t e = BfpSharedExponent(block);
          want[static_cast<size_t>(face * 16 + i)] = e;
          for (int64_t j = 0; j < 16; ++j) {
            const uint8_t c = BfpEncode(f, block[j], e);
            const int64_t row = face * 16 + i;
            if (f == k8) {
              want[static_cast<size_t>(64 + row * 16 + j)] = c;
            } else {
              want[static_cast<size_t>(64 + row * 8 + j / 2)] |=
                  static_cast<uint8_t>(c << (4 * (j % 2)));
            }
          }
        }
      for (const int64_t target : targets) {
        hwy::SetSupportedTargetsForTest(target);
        std::vector<uint8_t> got(want.size(), 0xAB);
        PackBfpTile(f, bits.data(), got.data());
        ASSERT_EQ(got, want) << BfpFormatName(f) << " " << hwy::TargetName(target);
      }
      hwy::SetSupportedTargetsForTest(0);
    }
  }
}

TEST(BfpLayoutTest, Bfp8TileBytes) {
  const std::vector<float> w = MakeLayoutMatrix(k8);
  const std::vector<uint8_t> p = Pack(k8, F32Ref(w, 64, 64));
  ASSERT_EQ(p.size(), 4u * 1088);
  // By hand, tile (0, 0): exponents of face 0 rows 0, 1; face 1 row 0 (k 0, n 16); face 2 row 0
  // (k 16); codes (k 0, n 0) negative 64, (k 0, n 1) 65, (k 1, n 0) 64, face 1's first (k 0,
  // n 16) 80, face 2's first (k 16, n 0) 64, face 3's last (k 31, n 31) 95.
  EXPECT_EQ(p[0], 60);
  EXPECT_EQ(p[1], 61);
  EXPECT_EQ(p[16], 60);
  EXPECT_EQ(p[32], 76);
  EXPECT_EQ(p[48], 76);
  EXPECT_EQ(p[64], 0xC0);
  EXPECT_EQ(p[65], 0x41);
  EXPECT_EQ(p[64 + 16], 0x40);
  EXPECT_EQ(p[64 + 256], 0x50);
  EXPECT_EQ(p[64 + 512], 0x40);
  EXPECT_EQ(p[1087], 0x5F);  // k 31, n 31: 62 % 3 != 0
  // Tile (0, 1) is the second tile (n 32-63): E + 64. Tile (1, 0) the third (k 32-63).
  EXPECT_EQ(p[1088], 124);
  EXPECT_EQ(p[2 * 1088], 92);
  // Every byte from the rule.
  for (int64_t tk = 0; tk < 2; ++tk)
    for (int64_t tn = 0; tn < 2; ++tn) {
      const uint8_t* t = p.data() + (tk * 2 + tn) * 1088;
      for (int64_t face = 0; face < 4; ++face)
        for (int64_t i = 0; i < 16; ++i) {
          const int64_t k = tk * 32 + face / 2 * 16 + i;
          ASSERT_EQ(t[face * 16 + i], LayoutExp(k, tn * 32)) << tk << tn << face << i;
          for (int64_t j = 0; j < 16; ++j) {
            const int64_t n = tn * 32 + face % 2 * 16 + j;
            ASSERT_EQ(t[64 + face * 256 + i * 16 + j], LayoutCode(k8, k, n)) << k << " " << n;
          }
        }
    }
  EXPECT_EQ(Dequantize(k8, p, 64, 64), w);  // representable values come back exactly
}

TEST(BfpLayoutTest, Bfp4NibbleOrder) {
  const std::vector<float> w = MakeLayoutMatrix(k4);
  const std::vector<uint8_t> p = Pack(k4, F32Ref(w, 64, 64));
  ASSERT_EQ(p.size(), 4u * 576);
  // (k 0, n 0) negative 4 = 0xC in the low nibble, (k 0, n 1) 5 in the high one.
  EXPECT_EQ(p[64], 0x5C);
  EXPECT_EQ(p[65], 0xF6);  // (k 0, n 2) 6 low; (k 0, n 3) negative 7 high
  for (int64_t tk = 0; tk < 2; ++tk)
    for (int64_t tn = 0; tn < 2; ++tn) {
      const uint8_t* t = p.data() + (tk * 2 + tn) * 576;
      for (int64_t face = 0; face < 4; ++face)
        for (int64_t i = 0; i < 16; ++i) {
          const int64_t k = tk * 32 + face / 2 * 16 + i;
          ASSERT_EQ(t[face * 16 + i], LayoutExp(k, tn * 32));
          for (int64_t j = 0; j < 16; j += 2) {
            const int64_t n = tn * 32 + face % 2 * 16 + j;
            ASSERT_EQ(t[64 + face * 128 + i * 8 + j / 2],
                      LayoutCode(k4, k, n) | LayoutCode(k4, k, n + 1) << 4)
                << k << " " << n;
          }
        }
    }
  EXPECT_EQ(Dequantize(k4, p, 64, 64), w);
}

TEST(BfpLayoutTest, OneByOne) {
  const std::vector<float> w = {0.3f};
  for (BfpFormat f : {k8, k4}) {
    const std::vector<uint8_t> p = Pack(f, F32Ref(w, 1, 1));
    std::vector<uint8_t> want(static_cast<size_t>(BfpTileBytes(f)), 0);
    want[0] = 125;                // 0.3f's exponent field; all-zero blocks: 0
    want[64] = f == k8 ? 77 : 5;  // see ExactValues
    EXPECT_EQ(p, want) << BfpFormatName(f);
    EXPECT_EQ(Dequantize(f, p, 1, 1)[0], f == k8 ? 77 * 0x1p-8f : 5 * 0x1p-4f);
  }
}

// [33, 70] packs as its zero-padded [64, 96], byte for byte; padding decodes to 0.
TEST(BfpLayoutTest, OddShapesAreZeroPadded) {
  const int64_t out = 33, in = 70;
  const std::vector<float> w = RandomMatrix(out, in, 7);
  std::vector<float> padded(64 * 96, 0.0f);  // [64 out][96 in]
  for (int64_t n = 0; n < out; ++n)
    for (int64_t k = 0; k < in; ++k) padded[n * 96 + k] = w[n * in + k];
  for (BfpFormat f : {k8, k4}) {
    const std::vector<uint8_t> p = Pack(f, F32Ref(w, out, in));
    ASSERT_EQ(p.size(), static_cast<size_t>(6 * BfpTileBytes(f)));
    EXPECT_EQ(p, Pack(f, F32Ref(padded, 64, 96)));
    // Tile (2, 1): k 64-95, n 32-63: only (k 64-69, n 32) hold weights.
    std::vector<float> tile(32 * 32);  // [32 k][32 n]
    UnpackBfpTile(f, p.data() + BfpLayout{f, out, in}.TileOffset(2, 1), tile.data());
    for (int64_t k = 0; k < 32; ++k)
      for (int64_t n = 0; n < 32; ++n)
        if (k >= 6 || n >= 1) {
          ASSERT_EQ(Bits(tile[k * 32 + n]), 0u) << k << " " << n;
        }
    const uint8_t* t = p.data() + BfpLayout{f, out, in}.TileOffset(2, 1);
    EXPECT_NE(t[0], 0);   // face 0 row 0 holds W[32, 64]
    EXPECT_EQ(t[6], 0);   // face 0 row 6: k 70, all padding
    EXPECT_EQ(t[16], 0);  // face 1: n 48-63, all padding
  }
}

// |dequantize(pack(W)) - W| <= one unit 2^(E - 127 - (B - 1)) of each block (rounding after a
// truncating shift, or saturation), for W at several scales.
TEST(BfpRoundTripTest, WithinTheFormatsBound) {
  const int64_t out = 40, in = 75;
  for (BfpFormat f : {k8, k4}) {
    const int b = BfpMagnitudeBits(f);
    for (float scale : {1.0f, 3e-3f, 7e4f, 1e-36f}) {
      std::vector<float> w = RandomMatrix(out, in, 11, scale);
      w[5] = 0.0f;
      w[6] = -0.0f;
      const std::vector<float> d = Dequantize(f, Pack(f, F32Ref(w, out, in)), out, in);
      double worst = 0;
      for (int64_t n = 0; n < out; ++n)
        for (int64_t k = 0; k < in; ++k) {
          uint32_t e = 0;  // the block of (k, n): n in [n / 16 * 16, + 16)
          for (int64_t m = n / 16 * 16; m < std::min(out, n / 16 * 16 + 16); ++m)
            e = std::max(e, (Bits(w[m * in + k]) >> 23) & 0xffu);
          const double unit = std::ldexp(1.0, static_cast<int>(e) - 127 - (b - 1));
          const double err = std::fabs(static_cast<double>(d[n * in + k]) - w[n * in + k]);
          ASSERT_LE(err, unit) << BfpFormatName(f) << " scale " << scale << " at " << n << "," << k;
          worst = std::max(worst, err / unit);
        }
      EXPECT_GT(worst, 0.25) << "the bound is not loose";
    }
  }
}

// A bf16 or f16 source packs to the bytes of its exact f32 widening.
TEST(BfpRoundTripTest, Bf16AndF16SourcesMatchTheirF32Values) {
  const int64_t out = 50, in = 45, stride = 47;
  const std::vector<float> w = RandomMatrix(out, stride, 3, 5.0f);
  std::vector<uint16_t> bf(w.size()), hf(w.size());  // [out][stride]
  std::vector<float> wb(out * in), wh(out * in);     // [out][in]
  for (int64_t n = 0; n < out; ++n)
    for (int64_t k = 0; k < stride; ++k) {
      bf[n * stride + k] = F32ToBF16(w[n * stride + k]);
      hf[n * stride + k] = F32ToF16(w[n * stride + k]);
      if (k < in) {
        wb[n * in + k] = BF16ToF32(bf[n * stride + k]);
        wh[n * in + k] = F16ToF32(hf[n * stride + k]);
      }
    }
  for (BfpFormat f : {k8, k4}) {
    EXPECT_EQ(Pack(f, MatrixRef{DType::kBF16, out, in, stride, bf.data()}),
              Pack(f, F32Ref(wb, out, in)));
    EXPECT_EQ(Pack(f, MatrixRef{DType::kF16, out, in, stride, hf.data()}),
              Pack(f, F32Ref(wh, out, in)));
  }
}

TEST(BfpErrorTest, NonFiniteWeightsAreRefusedNamingTheTensor) {
  const std::string name = "transformer.h.3.mlp.dense_h_to_4h.weight";
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> w = RandomMatrix(40, 70, 1);
    w[5 * 70 + 7] = bad;
    try {
      Pack(k8, F32Ref(w, 40, 70), name);
      FAIL() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[5, 7]"), std::string::npos) << e.what();
    }
  }
  std::vector<uint16_t> bf(4 * 4, F32ToBF16(1.0f));
  bf[9] = 0x7f80;  // bf16 +inf at [2, 1]
  std::vector<uint8_t> p(576);
  EXPECT_THROW(
      PackBfpTiles(k4, MatrixRef{DType::kBF16, 4, 4, 4, bf.data()}, name, 0, 1, 0, 1, p.data()),
      Error);
  // Two bad weights in different tile columns: the lower one is named on any thread count.
  std::vector<float> w = RandomMatrix(96, 64, 2);
  w[70 * 64 + 1] = NAN;   // tile column 2
  w[10 * 64 + 60] = NAN;  // tile column 0, a later tile row
  const int max_threads = omp_get_max_threads();
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    try {
      Pack(k8, F32Ref(w, 96, 64), name);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[10, 60]"), std::string::npos) << e.what();
    }
  }
  omp_set_num_threads(max_threads);
}

// PackBfpMatrix on any thread count, and PackBfpTiles over tile-row or tile-column ranges, write
// the same bytes; `done` sees the rows in order, in blocks of about 8 MiB of source.
TEST(BfpParallelTest, AnySplitGivesIdenticalBytes) {
  const int64_t out = 96, in = 32768;  // f32 rows of 128 KiB: blocks of 2 tile columns
  const std::vector<float> w = RandomMatrix(out, in, 5);
  const MatrixRef ref = F32Ref(w, out, in);
  for (BfpFormat f : {k8, k4}) {
    const BfpLayout l{f, out, in};
    const int max_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    std::vector<int64_t> done_rows;
    std::vector<uint8_t> serial(static_cast<size_t>(l.bytes()));
    PackBfpMatrix(f, ref, "w", serial.data(), [&](int64_t r0, int64_t r1) {
      done_rows.push_back(r0);
      done_rows.push_back(r1);
    });
    EXPECT_EQ(done_rows, (std::vector<int64_t>{0, 64, 64, 96}));
    omp_set_num_threads(4);
    EXPECT_EQ(Pack(f, ref), serial);
    omp_set_num_threads(max_threads);

    std::vector<uint8_t> by_rows(serial.size(), 0xAB);  // tile rows in ranges of 100
    const int64_t chunks = (l.k_tiles() + 99) / 100;
#pragma omp parallel for schedule(dynamic)
    for (int64_t c = 0; c < chunks; ++c)
      PackBfpTiles(f, ref, "w", c * 100, std::min(l.k_tiles(), c * 100 + 100), 0, l.n_tiles(),
                   by_rows.data());
    EXPECT_EQ(by_rows, serial);

    std::vector<uint8_t> by_cols(serial.size(), 0xAB);  // one tile column each, in reverse
    for (int64_t tn = l.n_tiles() - 1; tn >= 0; --tn)
      PackBfpTiles(f, ref, "w", 0, l.k_tiles(), tn, tn + 1, by_cols.data());
    EXPECT_EQ(by_cols, serial);
  }
}

}  // namespace
}  // namespace wc
