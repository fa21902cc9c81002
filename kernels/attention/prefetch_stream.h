// Software prefetch of stored rows (kv_rows.h), shared by the decode-attention kernels: the
// Highway ones (score_rows-inl.h) and the hand-written AVX-512 ones (x86_avx512.h users).
// Always inlined - a call inside a kernel's loop would spill its accumulators - and compiled for
// the baseline target, so it inlines into every wider one.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/attention/kv_rows.h"

namespace wc {

// The rows of a matrix whose cache lines a kernel prefetches as it walks: its own rows ahead, or
// another matrix's (the V of this chunk, the K of the next; no data = none). kLocality is
// __builtin_prefetch's: 1 (default) into L2, 3 into L1.
struct PrefetchStream {
  const uint8_t* data = nullptr;
  int64_t rows = 0, stride = 0, payload = 0;
  PrefetchStream() = default;
  explicit PrefetchStream(const RowsRef& m)
      : data(m.data),
        rows(m.data != nullptr ? m.rows : 0),
        stride(m.row_bytes),
        payload(m.data != nullptr ? m.PayloadBytes() : 0) {}
  // Rows [begin, end), clipped to the matrix.
  template <int kLocality = 1>
  inline __attribute__((always_inline)) void Rows(int64_t begin, int64_t end) const {
    end = std::min(end, rows);
    if (begin >= end) return;
    const uint8_t* first = data + begin * stride;
    const uint8_t* last = data + (end - 1) * stride + payload;
    for (const uint8_t* a = first; a < last; a += 64) __builtin_prefetch(a, 0, kLocality);
    __builtin_prefetch(last - 1, 0, kLocality);
  }
  template <int kLocality = 1>
  inline __attribute__((always_inline)) void Row(int64_t r) const {
    Rows<kLocality>(r, r + 1);
  }
};

}  // namespace wc
