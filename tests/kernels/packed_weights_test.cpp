// PackedMatrix in each weight format (kernels/gemm/weight_format.h): bf16 rounded to nearest even
// from f32 and f16, f32 widened exactly, and bfp8/bfp4 held as the exact packer's decoded values
// (DequantizeBfpMatrix of PackBfpMatrix), flushed in BF16 panels and exact in F32 ones, on odd
// shapes, any source dtype and row stride; the GEMM on a bfp matrix is the GEMM on those values
// bit for bit (the block-float contract) on every SIMD target and thread count; bytes() is
// the tiles' size; a non-finite weight is refused naming the tensor and its element.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "kernels/gemm/bfp/bfp_weights.h"
#include "kernels/gemm/bfp/gemm_bfp.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/packed_matrix.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

struct PackedSource {
  std::vector<uint8_t> bytes;
  std::vector<float> exact;  // [rows, cols] the stored values as floats
  MatrixRef ref;
};

// A [rows, cols] matrix of `dtype` with row stride cols + 5, values spanning several binades (and
// some tiny ones, so bfp blocks meet bf16 subnormals).
PackedSource MakePackedSource(DType dtype, int64_t rows, int64_t cols, uint64_t seed) {
  PackedSource s;
  const int64_t stride = cols + 5;
  Rng rng(seed);
  s.exact.resize(static_cast<size_t>(rows * cols));
  s.bytes.assign(static_cast<size_t>(rows * stride * DTypeSize(dtype)), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      float v = static_cast<float>((rng.Uniform() * 2.0 - 1.0) * std::exp2(-8.0 * rng.Uniform()));
      if (r % 7 == 3 && dtype != DType::kF16) v *= 0x1p-120f;  // rows of tiny values
      uint8_t* dst = &s.bytes[static_cast<size_t>((r * stride + k) * DTypeSize(dtype))];
      float& e = s.exact[static_cast<size_t>(r * cols + k)];
      if (dtype == DType::kF32) {
        e = v;
        std::memcpy(dst, &v, 4);
      } else {
        const uint16_t h = dtype == DType::kBF16 ? F32ToBF16(v) : F32ToF16(v);
        e = dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
        std::memcpy(dst, &h, 2);
      }
    }
  s.ref = MatrixRef{dtype, rows, cols, stride, s.bytes.data()};
  return s;
}

// W's values as the format holds them: [rows, cols].
std::vector<float> Expected(const PackedSource& s, WeightFormat f, bool flush) {
  std::vector<float> w = s.exact;
  if (IsBfp(f)) {
    const BfpLayout layout{BfpOf(f), s.ref.rows, s.ref.cols};
    std::vector<uint8_t> packed(static_cast<size_t>(layout.bytes()));
    PackBfpMatrix(BfpOf(f), s.ref, "w", packed.data());
    DequantizeBfpMatrix(layout, packed.data(), w.data());
  } else if (f == WeightFormat::kBF16) {
    for (float& v : w) v = BF16ToF32(F32ToBF16(v));
  }
  if (flush)
    for (float& v : w)
      if (std::fpclassify(v) == FP_SUBNORMAL) v = std::copysign(0.0f, v);
  return w;
}

std::vector<float> DecodedValues(const PackedMatrix& m) {
  std::vector<float> w(static_cast<size_t>(m.rows() * m.cols()));
  for (int64_t r = 0; r < m.rows(); ++r) m.Row(r, &w[static_cast<size_t>(r * m.cols())]);
  return w;
}

using test::SameBits;

TEST(PackedWeights, EveryFormatHoldsItsValues) {
  for (DType src : {DType::kF32, DType::kBF16, DType::kF16}) {
    const PackedSource s =
        MakePackedSource(src, 77, 45, 3);  // neither a multiple of 32 (tiles padded)
    for (WeightFormat f :
         {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kBfp8, WeightFormat::kBfp4}) {
      for (ActivationPrecision p : {ActivationPrecision::kF32, ActivationPrecision::kBF16}) {
        const PackedMatrix m = PackedMatrix::Pack(s.ref, f, p, "w");
        const bool bf16_panels =
            f == WeightFormat::kBF16 || (IsBfp(f) && p == ActivationPrecision::kBF16);
        const std::string what = Cat(DTypeName(src), " -> ", WeightFormatName(f), " ",
                                     p == ActivationPrecision::kBF16 ? "bf16" : "f32");
        EXPECT_EQ(m.format(), f) << what;
        EXPECT_EQ(m.dtype(), bf16_panels ? DType::kBF16 : DType::kF32) << what;
        EXPECT_EQ(m.precision(), bf16_panels ? p : ActivationPrecision::kF32) << what;
        EXPECT_TRUE(SameBits(DecodedValues(m), Expected(s, f, bf16_panels))) << what;
      }
    }
  }
}

TEST(PackedWeights, BytesAreTheTiles) {
  const PackedSource s = MakePackedSource(DType::kF32, 70, 100, 4);  // 3 x 4 tiles of 32x32
  EXPECT_EQ(PackedMatrix::Pack(s.ref, WeightFormat::kBfp8, ActivationPrecision::kBF16, "w").bytes(),
            size_t{12 * 1088});
  EXPECT_EQ(PackedMatrix::Pack(s.ref, WeightFormat::kBfp4, ActivationPrecision::kBF16, "w").bytes(),
            size_t{12 * 576});
  const PackedMatrix b =
      PackedMatrix::Pack(s.ref, WeightFormat::kBF16, ActivationPrecision::kBF16, "w");
  EXPECT_EQ(static_cast<int64_t>(b.bytes()), WeightFormatBytes(WeightFormat::kBF16, 70, 100));
  EXPECT_EQ(b.bytes(), size_t{96 * 128 * 2});
  EXPECT_EQ(WeightFormatBytes(WeightFormat::kF32, 70, 100), 96 * 100 * 4);
}

// The block-float contract: a bfp matrix multiplies exactly as the BF16 (or F32) matrix of its
// decoded values, on every SIMD target, both BF16 kernels and any thread count.
TEST(PackedWeights, BfpGemmIsTheGemmOfItsDecodedValues) {
  const int64_t rows = 70, cols = 75, n = 9;
  const PackedSource s = MakePackedSource(DType::kF32, rows, cols, 5);
  Rng rng(6);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = static_cast<float>(rng.Uniform() * 4.0 - 2.0);
  for (WeightFormat f : {WeightFormat::kBfp8, WeightFormat::kBfp4})
    for (ActivationPrecision p : {ActivationPrecision::kF32, ActivationPrecision::kBF16}) {
      const bool bf16 = p == ActivationPrecision::kBF16;
      const std::vector<float> d = Expected(s, f, false);
      std::vector<uint16_t> d16(d.size());
      for (size_t i = 0; i < d.size(); ++i) d16[i] = F32ToBF16(d[i]);  // exact
      const MatrixRef dref = bf16 ? MatrixRef{DType::kBF16, rows, cols, cols, d16.data()}
                                  : MatrixRef{DType::kF32, rows, cols, cols, d.data()};
      const PackedMatrix want_m = PackedMatrix::Pack(dref, p);
      const PackedMatrix m = PackedMatrix::Pack(s.ref, f, p, "w");
      std::vector<float> want(static_cast<size_t>(n * rows));
      Gemm(x.data(), n, want_m, nullptr, want.data());
      const int saved = omp_get_max_threads();
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        for (bool dot : {true, false}) {
          SetGemmX86Kernels(dot);
          std::vector<float> y(want.size());
          Gemm(x.data(), n, m, nullptr, y.data());
          EXPECT_TRUE(SameBits(y, want)) << WeightFormatName(f) << " threads " << threads;
          // One token at a time (decode) gives the same bits as the batch (prefill).
          for (int64_t t = 0; t < n; ++t) {
            std::vector<float> y1(static_cast<size_t>(rows));
            Gemm(&x[static_cast<size_t>(t * cols)], 1, m, nullptr, y1.data());
            EXPECT_TRUE(
                SameBits(y1, std::vector<float>(y.begin() + t * rows, y.begin() + (t + 1) * rows)));
          }
        }
      }
      omp_set_num_threads(saved);
      SetGemmX86Kernels(true);
      for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        std::vector<float> y(want.size());
        Gemm(x.data(), n, m, nullptr, y.data());
        EXPECT_TRUE(SameBits(y, want)) << WeightFormatName(f) << " " << hwy::TargetName(target);
      }
      hwy::SetSupportedTargetsForTest(0);
    }
}

TEST(PackedWeights, ReleasesRowsInOrderAndRefusesNonFiniteNamingTheElement) {
  PackedSource s = MakePackedSource(DType::kF32, 100, 64, 7);
  int64_t next = 0;
  PackedMatrix::Pack(s.ref, WeightFormat::kBfp8, ActivationPrecision::kBF16, "w",
                     [&](int64_t r0, int64_t r1) {
                       EXPECT_EQ(r0, next);
                       next = r1;
                     });
  EXPECT_EQ(next, 100);
  const float inf = INFINITY;
  std::memcpy(&s.bytes[static_cast<size_t>((67 * (64 + 5) + 40) * 4)], &inf, 4);
  try {
    PackedMatrix::Pack(s.ref, WeightFormat::kBfp4, ActivationPrecision::kBF16, "layer.weight");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer.weight: weight [67, 40] is inf"), std::string::npos)
        << e.what();
  }
  // bf16 and f32 keep what they are given (no refusal).
  EXPECT_TRUE(std::isinf(
      PackedMatrix::Pack(s.ref, WeightFormat::kF32, ActivationPrecision::kF32, "w").At(67, 40)));
  EXPECT_THROW(PackedMatrix::Pack(s.ref, WeightFormat::kF16, ActivationPrecision::kF32, "w"),
               Error);
}

// A bfp matrix holds its tiles, not a widened copy: bytes() is tt-metal's byte count (1088 / 576 a
// 32x32 tile, K and N padded to 32), under the bf16 panels' bytes, and the GEMM's printed kernel
// is the block-float one's.
TEST(PackedWeights, BfpHoldsTtMetalsBytes) {
  const PackedSource s = MakePackedSource(DType::kBF16, 70, 100, 8);  // 3 x 4 tiles of 32x32
  const size_t bf16 =
      PackedMatrix::Pack(s.ref, WeightFormat::kBF16, ActivationPrecision::kBF16, "w").bytes();
  EXPECT_EQ(bf16, 96u * 128 * 2);  // K padded to 32 (gemm.h's BF16 order)
  for (WeightFormat f : {WeightFormat::kBfp8, WeightFormat::kBfp4})
    for (ActivationPrecision p : {ActivationPrecision::kF32, ActivationPrecision::kBF16}) {
      const PackedMatrix m = PackedMatrix::Pack(s.ref, f, p, "w");
      const BfpLayout layout{BfpOf(f), 70, 100};
      EXPECT_EQ(m.bytes(), static_cast<size_t>(layout.bytes())) << WeightFormatName(f);
      EXPECT_EQ(m.bytes(), f == WeightFormat::kBfp8 ? 12u * 1088 : 12u * 576);
      EXPECT_EQ(m.bytes(), m.bfp().bytes());
      EXPECT_LT(m.bytes(), bf16);
      EXPECT_EQ(std::string(GemmKernelName(m)), GemmBfpKernelName(m.bfp()));
    }
  // The same shape in f32 / bf16 holds no tiles.
  EXPECT_TRUE(PackedMatrix::Pack(s.ref, WeightFormat::kBF16, ActivationPrecision::kBF16, "w")
                  .bfp()
                  .empty());
}

}  // namespace
}  // namespace wc
