// The head groups of the portable decode-attention kernels (score_rows-inl.h,
// decode_attention_weighted.cpp): heads in groups of up to 4, and the prefetch distance. A Highway
// per-target header: included once per target by each file's foreach_target.

// Include guard toggled per target (Highway's -inl.h convention).
#if defined(WC_KERNELS_HEAD_GROUPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WC_KERNELS_HEAD_GROUPS_INL_H_
#undef WC_KERNELS_HEAD_GROUPS_INL_H_
#else
#define WC_KERNELS_HEAD_GROUPS_INL_H_
#endif

#include <cstdint>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/attention/decode_attention.h"  // kChunkPrefetchRows
#include "kernels/attention/prefetch_stream.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {

// Rows ahead of the one being computed whose cache lines are prefetched: the chunk streams from
// DRAM, and the prefetches keep enough misses in flight while the core computes.
constexpr int64_t kPrefetchRows = kChunkPrefetchRows;

// The rows of a second matrix (the V of this chunk, the K of the next), prefetched at the pace a
// kernel walks its own rows, so memory keeps streaming while the core computes.
using Along = PrefetchStream;

// Calls fn(std::integral_constant<int, NH>(), h, along_or_none) for the heads [h, h + NH) in
// groups of 4 and one last group of 1-3: the head-group kernels are templates on NH. Only the
// first group prefetches `along` (one pass over it is enough).
template <class Fn>
HWY_INLINE void ForHeadGroups(int n_heads, const Along& along, const Fn& fn) {
  int h = 0;
  for (; h + 4 <= n_heads; h += 4)
    fn(std::integral_constant<int, 4>(), h, h == 0 ? along : Along());
  const Along& rest = h == 0 ? along : Along();
  switch (n_heads - h) {
    case 3:
      return fn(std::integral_constant<int, 3>(), h, rest);
    case 2:
      return fn(std::integral_constant<int, 2>(), h, rest);
    case 1:
      return fn(std::integral_constant<int, 1>(), h, rest);
    default:
      return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#endif  // WC_KERNELS_HEAD_GROUPS_INL_H_
