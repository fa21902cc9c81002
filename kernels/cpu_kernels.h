// The hand-written kernel families and the CPUs that run them: one enabled flag, one CPU check and
// one switch per family, for every kernel table and every test that compares a family with the
// portable kernels beside it (kernel_table.h for attention, gemm.cpp for the GEMM).
#pragma once

#include <cstdint>
#include <string>

namespace wc {

enum class CpuKernels : uint8_t {
  kPortable,        // Highway's run-time dispatch: every CPU, its best target
  kAvx512Vnni,      // vpdpbusd / vpdpwssd: the int8 attention kernels (int8.h) and the quantized
                    // GEMM's many-token kernel (quant_gemm_vnni.cpp)
  kAvx512Bf16Vbmi,  // vdpbf16ps and vpermi2b: the fp8 / bfp8 attention kernels (..._bf16dot.h)
  kAvx512Gemm,      // AVX-512F: the block-float GEMM's one-token tile (gemm_bfp_one_token.h)
  kAmxBf16Gemm,     // tdpbf16ps: the BF16 GEMM on AMX tiles (gemm_amx.h) and bfp4's one-token
                    // tile; AVX-512 allowed, and the OS's tile state enabled and granted to us
  kAvx2Int8,        // vpmaddubsw / vpmaddwd (AVX2, FMA, F16C): the quantized GEMM (quant_gemm.h)
  kAvx2Gemm,        // AVX2 + FMA: the block-float GEMM's one-token tile where Highway's dispatch
                    // runs its AVX2 target (gemm_bfp_one_token.h)
};

// True when this CPU has the family's instructions and WORMCHAT_SIMD (simd_limit.h) allows them;
// always for kPortable. Read once per family.
bool CpuHas(CpuKernels family);

// CpuHas(family) and tests have not switched the family off.
bool KernelsOn(CpuKernels family);

// Tests switch a family off (and on) to compare it with the portable path; kPortable stays on.
void SetKernelsEnabled(CpuKernels family, bool enabled);

// The instructions a family runs on as printed in kernel names ("AVX-512 VNNI"); for kPortable,
// Highway's best target on this CPU within WORMCHAT_SIMD ("AVX3", "AVX2", "scalar").
std::string CpuKernelsName(CpuKernels family);

// The switches and checks by the names tests and benchmarks use: int8 on VNNI, fp8 / bfp8 on
// AVX-512 BF16.
inline void SetVnniKernels(bool enabled) {
  SetKernelsEnabled(CpuKernels::kAvx512Vnni, enabled);
}
inline bool CpuHasVnniKernels() {
  return CpuHas(CpuKernels::kAvx512Vnni);
}
inline void SetBf16DotKernels(bool enabled) {
  SetKernelsEnabled(CpuKernels::kAvx512Bf16Vbmi, enabled);
}
inline bool CpuHasBf16DotKernels() {
  return CpuHas(CpuKernels::kAvx512Bf16Vbmi);
}

}  // namespace wc
