#include "model/lm_head.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace wc {

FracturedLMHead::FracturedLMHead(const MatrixRef& weights, int fractures)
    : weights_(weights), fractures_(fractures) {
  padded_vocab_ = static_cast<int>((weights.rows + kPadMultiple - 1) / kPadMultiple * kPadMultiple);
  if (fractures < 1 || padded_vocab_ % fractures != 0 || (padded_vocab_ / fractures) % 32 != 0)
    throw Error(Cat("--lm-head-fractures ", fractures, " must divide the padded vocabulary of ",
                    padded_vocab_, " rows into slices of a multiple of 32 rows (try 1, 2, 4, 8)"));
}

void FracturedLMHead::Compute(const float* x, int64_t n, float* logits) const {
  const int64_t slice = padded_vocab_ / fractures_;
  const int64_t vocab = weights_.rows;
  std::vector<float> part(static_cast<size_t>(n * slice));  // [n, slice]: one fracture's output
  for (int f = 0; f < fractures_; ++f) {
    const int64_t begin = f * slice;
    const int64_t real_end = std::min(vocab, begin + slice);  // rows past vocab are padding
    std::fill(part.begin(), part.end(), 0.0f);
    if (real_end > begin)
      MatMul(x, n, weights_.cols, weights_, nullptr, part.data(), slice, begin, real_end);
    // Combine: concatenate the fracture's real rows into the logits, dropping its padding.
    for (int64_t t = 0; t < n && real_end > begin; ++t)
      std::memcpy(logits + t * vocab + begin, part.data() + t * slice,
                  static_cast<size_t>(real_end - begin) * sizeof(float));
  }
}

}  // namespace wc
