// WORMCHAT_SIMD: the widest SIMD the kernels may use, so that figures for CPUs without AVX-512
// (issue 16's second machine kind) can be measured on one that has it, with the same binary.
// Read once from the environment:
//   native (or unset)  every target this CPU and the binary have (the default)
//   avx2               Highway's AVX2 target at most, and none of the hand-written AVX-512
//                      kernels (the bf16 dot GEMM, the VNNI and BF16 attention kernels)
//   sse4               Highway's SSE4 target at most, no AVX-512 kernel
// A limit above what the CPU has changes nothing.
#pragma once

#include <string>

namespace wc {

// Applies the limit to Highway's run-time dispatch. Call it before the first kernel runs (main
// does). Throws Error naming the variable when its value is none of the above.
void ApplySimdLimit();

// False when the limit excludes AVX-512 (the hand-written kernels check it with the CPU's flags).
bool Avx512KernelsAllowed();
// False when the limit excludes AVX2 (sse4): the hand-written AVX2 kernels check it.
bool Avx2KernelsAllowed();

// "native", "avx2" or "sse4": the limit in force (an unknown value counts as native until
// ApplySimdLimit reports it).
std::string SimdLimitName();

}  // namespace wc
