#include "kernels/cpu_kernels.h"

#include <atomic>
#include <vector>

#include "hwy/targets.h"
#include "kernels/simd_limit.h"

namespace wc {
namespace {

constexpr int kFamilies = 4;

std::atomic<bool> g_enabled[kFamilies] = {true, true, true, true};

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
