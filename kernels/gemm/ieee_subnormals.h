// The integer GEMMs' float steps are IEEE's, subnormals included (quant_gemm.h, bfp_int8.h), on
// every path, while other kernels run with FTZ / DAZ set for their own scope.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace wc {

// MXCSR with FTZ and DAZ clear for the scope, restored after.
class IeeeSubnormals {
 public:
#if defined(__x86_64__) || defined(__i386__)
  IeeeSubnormals() : csr_(_mm_getcsr()) {
    _mm_setcsr(csr_ & ~0x8040u);
  }
  ~IeeeSubnormals() {
    _mm_setcsr(csr_);
  }
  IeeeSubnormals(const IeeeSubnormals&) = delete;
  IeeeSubnormals& operator=(const IeeeSubnormals&) = delete;

 private:
  unsigned csr_;
#endif
};

}  // namespace wc
