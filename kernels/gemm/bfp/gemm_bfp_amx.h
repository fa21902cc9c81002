// Block-float weights (gemm_bfp.h's panels) times a few tokens - a speculative verify step, a
// short prompt chunk - on AMX tiles, without a widened copy of the panel: each k tile's 1,024 codes
// are widened with AVX-512 into one 2 KiB BF16 block in L1 (the BF16 panel's k-pair rows, which
// are AMX B tiles as they lie) and multiplied at once by every token tile's TDPBF16PS, the C tiles
// held in tile registers over the whole panel. The panel streams from memory once, as for one
// token, and nothing is written back but y.
//
// Contract: gemm_bfp.h's - the BF16 GEMM's bits on the decoded values (gemm_amx.h's order: one
// TDPBF16PS per 32-k block into a C tile from zero), the widening gemm_bfp.cpp's portable one
// (each code's f32 value times its block's unit under FTZ, a bf16 subnormal flushed to zero of its
// sign; exact, so its top 16 bits are the bf16), plain panels or not.
#pragma once

#include <cstdint>

namespace wc {

struct AmxGemmInput;
namespace gemm {
struct BfpTask;
}

// Calls of [kBfpWidenOnceTokensAmx, kBfpAmxFusedMaxTokens] tokens run here (two AMX token tiles:
// the C tiles of both stay in registers); longer ones widen each panel once for gemm_amx.h's
// blocked schedule (gemm_bfp.cpp's RunWidened), where the widening is shared by more tokens.
constexpr int64_t kBfpAmxFusedMaxTokens = 32;

// Panels [pa, pb) of `task` (gemm_schedule.h's BfpTask: the panels, the row range, bias and y)
// times x, on the calling thread; nothing of y outside the task's rows and x's tokens is written.
// Needs AmxBf16GemmAvailable(), x packed for these panels (padded_cols == 32 * k tiles) and
// x.n_tokens in [1, kBfpAmxFusedMaxTokens]. Leaves the MXCSR's modes as it found them and releases
// the tiles.
void GemmBfpAmxRange(const AmxGemmInput& x, const gemm::BfpTask& task, int64_t pa, int64_t pb);

}  // namespace wc
