#include "kernels/simd_limit.h"

#include <cstdlib>
#include <cstring>

#include "hwy/targets.h"
#include "util/error.h"

namespace wc {
namespace {

enum class Limit { kNative, kAVX2, kSSE4, kInvalid };

Limit ParseLimit(const char* v) {
  if (v == nullptr || *v == '\0' || std::strcmp(v, "native") == 0) return Limit::kNative;
  if (std::strcmp(v, "avx2") == 0) return Limit::kAVX2;
  if (std::strcmp(v, "sse4") == 0) return Limit::kSSE4;
  return Limit::kInvalid;
}

Limit CurrentLimit() {
  static const Limit limit = ParseLimit(std::getenv("WORMCHAT_SIMD"));
  return limit;
}

// Highway's x86 targets above AVX2 in this version (lower bits are better targets).
int64_t Avx512Targets() {
  int64_t t = HWY_AVX3 | HWY_AVX3_DL;
#ifdef HWY_AVX3_ZEN4
  t |= HWY_AVX3_ZEN4;
#endif
#ifdef HWY_AVX3_SPR
  t |= HWY_AVX3_SPR;
#endif
  return t;
}

}  // namespace

void ApplySimdLimit() {
  switch (CurrentLimit()) {
    case Limit::kNative:
      return;
    case Limit::kAVX2:
      return hwy::DisableTargets(Avx512Targets());
    case Limit::kSSE4:
      return hwy::DisableTargets(Avx512Targets() | HWY_AVX2);
    case Limit::kInvalid:
      break;
  }
  throw Error(std::string("WORMCHAT_SIMD: unknown value '") + std::getenv("WORMCHAT_SIMD") +
              "' (expected native, avx2 or sse4)");
}

bool Avx512KernelsAllowed() {
  const Limit l = CurrentLimit();
  return l == Limit::kNative || l == Limit::kInvalid;
}

bool Avx2KernelsAllowed() {
  return CurrentLimit() != Limit::kSSE4;
}

std::string SimdLimitName() {
  switch (CurrentLimit()) {
    case Limit::kAVX2:
      return "avx2";
    case Limit::kSSE4:
      return "sse4";
    default:
      return "native";
  }
}

}  // namespace wc
