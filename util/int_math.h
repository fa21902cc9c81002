// Integer helpers the layers share.
#pragma once

#include <cstdint>

namespace wc {

// ceil(a / b) for a >= 0, b > 0: tiles, chunks or slices of b needed to hold a.
constexpr int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace wc
