// The head-group ladders of the hand-written AVX-512 kernels, written once for every family.
//
// Include this inside the family's `#pragma GCC target` region (one region, one target per
// translation unit), as int8_vnni.cpp and decode_attention_bf16dot.cpp do: the
// lambdas the ladders call take their instructions from that pragma (GCC gives a lambda no target
// attribute from the function it is written in, and refuses an always-inline call across
// targets), so ladder, lambda and head kernel compile for one target and inline into one loop.
#pragma once

#include <algorithm>
#include <type_traits>

namespace wc {
namespace x86 {

// fn(integral_constant NH, h) for the heads [h, h + NH) of n_heads: groups of 8, then one of 4, 2
// and 1 as they fit. For kernels that read a block of rows once per head group (rows in lanes):
// a head's arithmetic never depends on its group, so any split gives the same outputs.
template <class Fn>
inline __attribute__((always_inline)) void ForHeadLadder(int n_heads, const Fn& fn) {
  int h = 0;
  for (; h + 8 <= n_heads; h += 8) fn(std::integral_constant<int, 8>(), h);
  if (h + 4 <= n_heads) {
    fn(std::integral_constant<int, 4>(), h);
    h += 4;
  }
  if (h + 2 <= n_heads) {
    fn(std::integral_constant<int, 2>(), h);
    h += 2;
  }
  if (h < n_heads) fn(std::integral_constant<int, 1>(), h);
}

// fn(integral_constant NH, h) for groups of 4 heads and a last one of 1-3: the P.V kernels, whose
// 4 heads' accumulators fill the registers.
template <class Fn>
inline __attribute__((always_inline)) void ForHeadGroupsOf4(int n_heads, const Fn& fn) {
  for (int h = 0; h < n_heads; h += 4) {
    switch (std::min(4, n_heads - h)) {
      case 1:
        fn(std::integral_constant<int, 1>(), h);
        break;
      case 2:
        fn(std::integral_constant<int, 2>(), h);
        break;
      case 3:
        fn(std::integral_constant<int, 3>(), h);
        break;
      default:
        fn(std::integral_constant<int, 4>(), h);
    }
  }
}

}  // namespace x86
}  // namespace wc
