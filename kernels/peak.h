// The machine's measured arithmetic peak: floating-point (and integer) operations per second that
// the vector units sustain with every OpenMP thread busy, for the instructions the matmuls can use.
// Bounds for `wormchat bench model` (a prefill or batched decode reports its speed as a share of
// it).
#pragma once

namespace wc {

struct PeakFlops {
  double f32_fma = 0;     // FLOP/s of f32 fused multiply-adds (2 per lane), the SIMD target's width
  double bf16_dot = 0;    // FLOP/s of AVX-512 BF16 dot products (vdpbf16ps: 4 per f32 lane); 0 if
                          // the CPU has none
  double amx_bf16 = 0;    // FLOP/s of AMX TDPBF16PS (16 x 16 x 32 products a tile); 0 if the CPU or
                          // the OS gives this process none (cpu_kernels.h's kAmxBf16Gemm)
  double int8_avx2 = 0;   // integer OP/s (2 per product) of the quantized GEMM's AVX2 step
                          // (vpmaddubsw, vpmaddwd, vpaddd); 0 without kAvx2Int8
  double int8_vnni = 0;   // the same of its AVX-512 VNNI step (vpdpbusd, 512 bits); 0 without
                          // kAvx512Vnni (or under WORMCHAT_SIMD=avx2)
  double int16_avx2 = 0;  // integer OP/s of the int16 GEMM's AVX2 step (vpmaddwd, vpaddd); 0
                          // without kAvx2Int8 or when not asked for
};

// Runs each kind for about `seconds` on all threads (independent accumulator chains, no memory
// traffic) and reports the best of three rounds. The int16 step only when `int16` (the runs whose
// matrices multiply so: --matmul-precision int16), each kind costing a few tenths of a second.
PeakFlops MeasurePeakFlops(double seconds = 0.2, bool int16 = false);

}  // namespace wc
