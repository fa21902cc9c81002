#include "kernels/cpu_kernels.h"

#include <atomic>
#include <vector>

#if defined(__linux__) && defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "hwy/targets.h"
#include "kernels/simd_limit.h"

namespace wc {
namespace {

constexpr int kFamilies = 7;

std::atomic<bool> g_enabled[kFamilies] = {true, true, true, true, true, true, true};

// AVX-512 F, BW, DQ and VL (what every hand-written kernel is compiled for) within WORMCHAT_SIMD.
// __builtin_cpu_supports takes only a literal, so each family names its own extensions below.
bool CpuHasAvx512() {
#if defined(__x86_64__) || defined(__i386__)
  return Avx512KernelsAllowed() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

// AMX-TILE and AMX-BF16 usable by this process: the CPU has them, the OS saves the tile state
// (XCR0 bits 17 and 18, XTILECFG and XTILEDATA) and grants this process the tile data
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), which Linux requires before the first tile
// instruction; the grant covers every thread of the process). Asks once, at the first call.
bool AmxTileDataGranted() {
#if defined(__linux__) && defined(__x86_64__)
  if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16")) return false;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || (ecx & bit_OSXSAVE) == 0) return false;
  uint32_t xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  constexpr uint32_t kTileState = (1u << 17) | (1u << 18);
  if ((xcr0_lo & kTileState) != kTileState) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

}  // namespace

bool CpuHas(CpuKernels family) {
  switch (family) {
    case CpuKernels::kPortable:
      return true;
    case CpuKernels::kAvx512Vnni: {
      static const bool has = CpuHasAvx512() && __builtin_cpu_supports("avx512vnni");
      return has;
    }
    case CpuKernels::kAvx512Bf16Vbmi: {
      static const bool has = CpuHasAvx512() && __builtin_cpu_supports("avx512bf16") &&
                              __builtin_cpu_supports("avx512vbmi");
      return has;
    }
    case CpuKernels::kAvx512Gemm: {
      static const bool has = CpuHasAvx512();
      return has;
    }
    case CpuKernels::kAmxBf16Gemm: {
      static const bool has = CpuHasAvx512() && AmxTileDataGranted();
      return has;
    }
    case CpuKernels::kAvx2Int8: {
      static const bool has = Avx2KernelsAllowed() && __builtin_cpu_supports("avx2") &&
                              __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
      return has;
    }
    case CpuKernels::kAvx2Gemm: {
      static const bool has =
          Avx2KernelsAllowed() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
      return has;
    }
  }
  return false;
}

bool KernelsOn(CpuKernels family) {
  return CpuHas(family) && g_enabled[static_cast<int>(family)].load(std::memory_order_relaxed);
}

void SetKernelsEnabled(CpuKernels family, bool enabled) {
  if (family != CpuKernels::kPortable) g_enabled[static_cast<int>(family)].store(enabled);
}

std::string CpuKernelsName(CpuKernels family) {
  switch (family) {
    case CpuKernels::kAvx512Vnni:
      return "AVX-512 VNNI";
    case CpuKernels::kAvx512Bf16Vbmi:
      return "AVX-512 BF16";
    case CpuKernels::kAvx512Gemm:
      return "AVX-512F";
    case CpuKernels::kAmxBf16Gemm:
      return "AMX BF16";
    case CpuKernels::kAvx2Int8:
      return "AVX2 int8";
    case CpuKernels::kAvx2Gemm:
      return "AVX2 FMA";
    case CpuKernels::kPortable:
      break;
  }
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  // SupportedTargets() (under SupportedAndGeneratedTargets) re-detects the CPU and points Highway's
  // dispatch at every target it has, WORMCHAT_SIMD's DisableTargets mask ignored (Highway 1.0's
  // guard against recursion; its FunctionCache re-applies the mask, a direct call does not): put
  // the masked choice back, so naming a kernel never changes which one runs.
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  return targets.empty() ? "scalar" : hwy::TargetName(targets.front());
}

}  // namespace wc
