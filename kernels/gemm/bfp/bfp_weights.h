// Wormhole block-float weight tiles (BFP8_B, BFP4_B): the codec, byte for byte as tt-metal's host
// packer lays them out (tt_metal/impl/data_format/blockfloat_common.cpp, after its January 2025
// round-to-nearest-even fix), with the differences issue 30 asks for noted below.
//
// Layout. A Linear weight W of Hugging Face shape [out, in] is packed as tt-metal's Falcon models
// upload it: transposed to [K = in, N = out], zero-padded to multiples of 32 in both, cut into
// 32x32 tiles stored in row-major order over the padded [K, N] (tile (tk, tn) holds k in
// [32 tk, 32 tk + 32), n in [32 tn, 32 tn + 32)). A tile is four 16x16 faces: face 0 = rows
// (k) 0-15 x cols (n) 0-15, face 1 = rows 0-15 x cols 16-31, face 2 = rows 16-31 x cols 0-15,
// face 3 = rows 16-31 x cols 16-31. A block = one face row = 16 consecutive n at one k, sharing
// one 8-bit exponent E. A tile's bytes:
//   [0, 64)     exponents: byte f * 16 + i = E of face f's row i
//   [64, ...)   codes, face by face, each face row-major (i, then j): bfp8 one byte a code
//               ([4][16][16] bytes); bfp4 two codes a byte, the first (even j) in the low nibble
//               ([4][16][8] bytes)
// 1088 bytes (bfp8) or 576 (bfp4) a tile: 8.5 and 4.5 bits a weight.
//
// Encoding (B = 7 magnitude bits for bfp8, 3 for bfp4), on float32 bit patterns:
//   1. E = the largest exponent field of the block's 16 values (zero or denormal: 0).
//   2. A value whose exponent field e is 0 (zero or float32 denormal) encodes as 0.
//   3. Otherwise M = 0x800000 | fraction, shifted right by E - e, truncating (>= 32: 0).
//   4. S = 24 - B; q = M >> S, r = M & (2^S - 1); q += 1 if r > 2^(S-1) or (r == 2^(S-1) and
//      q is odd) (round half to even); q = min(q, 2^B - 1) (saturates; nothing carries into E).
//   5. code = sign << B | q, the sign cleared when q == 0 (no negative zero).
// Non-finite weights are refused (wc::Error naming the tensor and the element).
//
// Decoding: code (sign, q) in a block of exponent E is exactly (-1)^sign * q * 2^(E - 127 - (B-1)).
// Every such value is exactly a float32 and exactly a bf16: q has at most B <= 7 significant bits
// (bf16 has 8), the value is below 2^128 (finite), and its unit 2^(E - 127 - (B - 1)) >= 2^-133 is
// a multiple of bf16's subnormal step 2^-133. It is a bf16 (and float32) NORMAL iff
// E + floor(log2 q) >= B, i.e. |value| >= 2^-126; so every nonzero code of a block is normal iff
// E >= B (bfp8: E >= 7, block max >= 2^-120; bfp4: E >= 3). Below that the widened bf16 is a
// subnormal, which vdpbf16ps reads as zero (DAZ): a GEMM widening codes to bf16 must flush those
// codes itself so its portable and AVX-512 BF16 paths agree (BfpDecodeBF16 returns the exact bf16,
// not flushed).
//
// tt-metal's current code differs from the steps above only on inputs real weights never hold:
//  - a float32 denormal (e = 0, fraction != 0): tt-metal adds the hidden bit as if it were normal
//    with e = 0, so it encodes as nonzero when the block's E < 24 (e.g. an all-denormal block
//    gives q = 2^(B-1) or more); here it is 0 (step 2). Equal whenever E >= 24.
//  - Inf/NaN: tt-metal takes exponent field 255 as E and packs garbage; here they are refused.
//  - tt-metal's unpacker renormalizes q into a float32 exponent E - shift and, for bfp8, wraps
//    when that underflows (E small); BfpDecode returns the exact value above.
//  Everything else (E of an all-zero block = 0, shift >= 32 gives 0, RNE with saturation, sign
//  cleared when q == 0, exponent and nibble order) is tt-metal's.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/matmul.h"

namespace wc {

enum class BfpFormat : uint8_t { kBfp8, kBfp4 };

constexpr int64_t kBfpTileDim = 32;        // a tile is [32 k][32 n]
constexpr int64_t kBfpFaceDim = 16;        // a face is [16 k][16 n]; a block is one face row
constexpr int64_t kBfpExponentBytes = 64;  // 4 faces x 16 rows

// B: 7 (bfp8) or 3 (bfp4).
constexpr int BfpMagnitudeBits(BfpFormat f) {
  return f == BfpFormat::kBfp8 ? 7 : 3;
}
// 1088 (bfp8) or 576 (bfp4).
constexpr int64_t BfpTileBytes(BfpFormat f) {
  return kBfpExponentBytes + kBfpTileDim * kBfpTileDim * (f == BfpFormat::kBfp8 ? 8 : 4) / 8;
}
// "bfp8" or "bfp4"; BfpFormatFromName is its inverse (nullopt for any other string).
const char* BfpFormatName(BfpFormat f);
std::optional<BfpFormat> BfpFormatFromName(std::string_view name);

// The packed shape of a weight of HF shape [out, in]: [k_tiles][n_tiles] tiles of TileBytes.
struct BfpLayout {
  BfpFormat format = BfpFormat::kBfp8;
  int64_t out = 0;  // N before padding (W's rows)
  int64_t in = 0;   // K before padding (W's columns)

  int64_t k_tiles() const { return (in + kBfpTileDim - 1) / kBfpTileDim; }
  int64_t n_tiles() const { return (out + kBfpTileDim - 1) / kBfpTileDim; }
  int64_t tiles() const { return k_tiles() * n_tiles(); }
  int64_t tile_bytes() const { return BfpTileBytes(format); }
  int64_t bytes() const { return tiles() * tile_bytes(); }
  // Byte offset of tile (tk, tn) in the packed buffer.
  int64_t TileOffset(int64_t tk, int64_t tn) const { return (tk * n_tiles() + tn) * tile_bytes(); }
};

// ---- One block (steps 1-5) and one code.

// Step 1: E of a block. bits: [16] float32 bit patterns (finite).
uint8_t BfpSharedExponent(const uint32_t* bits);
// Steps 2-5: the code of float32 bit pattern `bits` (finite) in a block of exponent E (>= its own
// exponent field). The code fits in B + 1 bits.
uint8_t BfpEncode(BfpFormat f, uint32_t bits, uint32_t shared_exp);
// The exact value of `code` in a block of exponent E: (-1)^sign * q * 2^(E - 127 - (B - 1)).
// +0.0f when q == 0. E <= 254 (the packer never writes 255: its weights are finite; a reader of
// packed bytes from a file should refuse 255, which would decode to an infinity or NaN).
float BfpDecode(BfpFormat f, uint8_t code, uint8_t shared_exp);
// The same value as bf16 bits, exact (see above; a subnormal is not flushed).
uint16_t BfpDecodeBF16(BfpFormat f, uint8_t code, uint8_t shared_exp);
// True iff every nonzero code of a block of exponent E decodes to a bf16 normal (E >= B).
constexpr bool BfpBlockIsBf16Normal(BfpFormat f, uint8_t shared_exp) {
  return shared_exp >= BfpMagnitudeBits(f);
}

// ---- One tile.

// Packs tile values `bits` [32 k][32 n] (float32 bit patterns, finite) into `tile`
// [BfpTileBytes(f)] bytes.
// bits [32 k][32 n] = the float32 bits of tile (tk, tn) of the transposed, zero-padded W (what
// PackBfpTile packs). Throws wc::Error naming `name` and the element for a non-finite weight.
void GatherBfpTile(const MatrixRef& w, const std::string& name, int64_t tk, int64_t tn,
                   uint32_t* bits);
void PackBfpTile(BfpFormat f, const uint32_t* bits, uint8_t* tile);
// Decodes `tile` [BfpTileBytes(f)] to values [32 k][32 n] f32.
void UnpackBfpTile(BfpFormat f, const uint8_t* tile, float* values);

// ---- A matrix.

// W is read through a MatrixRef of HF shape [out = w.rows, in = w.cols], F32, BF16 or F16, any
// row stride, unaligned (a tensor in a mapped checkpoint; bf16 and f16 widen exactly to f32, so
// packing them gives the bytes of packing their f32 values). `packed` is the whole matrix's
// buffer, [layout.bytes()] with layout = BfpLayout{f, w.rows, w.cols}.

// Packs tiles tk in [tk_begin, tk_end) x tn in [tn_begin, tn_end) (each written whole, padding
// included) on the calling thread, reading W's rows [32 tn_begin, 32 tn_end) and columns
// [32 tk_begin, 32 tk_end). Disjoint rectangles may be packed concurrently: a range of tile rows
// (tk) or, reading whole source rows so their pages can be released, of tile columns (tn). Throws
// wc::Error naming `name` and the element when W holds a NaN or an infinity there (catch it
// inside an OpenMP region).
void PackBfpTiles(BfpFormat f, const MatrixRef& w, const std::string& name, int64_t tk_begin,
                  int64_t tk_end, int64_t tn_begin, int64_t tn_end, uint8_t* packed);

// Called after W's rows [row_begin, row_end) are packed (in blocks of rows, in order).
using BfpRowsDone = std::function<void(int64_t row_begin, int64_t row_end)>;

// Packs all of W, in parallel (OpenMP) over tile columns, in blocks of about 8 MiB of source rows,
// calling `done` after each block. Throws wc::Error as PackBfpTiles (for the first bad element in
// row-block order, whatever the thread count).
void PackBfpMatrix(BfpFormat f, const MatrixRef& w, const std::string& name, uint8_t* packed,
                   const BfpRowsDone& done = nullptr);

// Decodes `packed` [layout.bytes()] back to W's HF shape: w [layout.out, layout.in] f32,
// row-major; padding dropped. Exactly the values the codes stand for (--matmul-precision f32).
void DequantizeBfpMatrix(const BfpLayout& layout, const uint8_t* packed, float* w);

}  // namespace wc
