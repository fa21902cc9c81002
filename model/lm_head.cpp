#include "model/lm_head.h"

#include <algorithm>
#include <cstring>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_profile.h"
#include "util/error.h"

namespace wc {

FracturedLMHead::FracturedLMHead(const PackedMatrix& weights, int fractures)
    : weights_(&weights),
      fractures_(fractures),
      padded_vocab_(PaddedVocab(weights.rows(), fractures)) {}

int FracturedLMHead::PaddedVocab(int64_t vocab, int fractures) {
  const int padded = static_cast<int>((vocab + kPadMultiple - 1) / kPadMultiple * kPadMultiple);
  if (fractures < 1 || padded % fractures != 0 || (padded / fractures) % 32 != 0)
    throw Error(Cat("--lm-head-fractures ", fractures, " must divide the padded vocabulary of ",
                    padded, " rows into slices of a multiple of 32 rows (try 1, 2, 4, 8)"));
  return padded;
}

void FracturedLMHead::Compute(const float* x, int64_t n, float* logits) const {
  const int64_t slice = padded_vocab_ / fractures_;
  const int64_t vocab = weights_->rows();
  const GemmCallTimer timer(GemmProfile::Recording() ? "lm_head" : "", *weights_, n,
                            2.0 * static_cast<double>(n) * static_cast<double>(vocab) *
                                static_cast<double>(weights_->cols()));
  const GemmInput in = PackGemmInput(x, n, weights_->cols(), *weights_);  // shared by fractures
  std::vector<float> part(static_cast<size_t>(n * slice));  // [n, slice]: one fracture's output
  for (int f = 0; f < fractures_; ++f) {
    const int64_t begin = f * slice;
    const int64_t real_end = std::min(vocab, begin + slice);  // rows past vocab are padding
    std::fill(part.begin(), part.end(), 0.0f);
    if (real_end > begin) Gemm(in, *weights_, nullptr, part.data(), slice, begin, real_end);
    // Combine: concatenate the fracture's real rows into the logits, dropping its padding.
    for (int64_t t = 0; t < n && real_end > begin; ++t)
      std::memcpy(logits + t * vocab + begin, part.data() + t * slice,
                  static_cast<size_t>(real_end - begin) * sizeof(float));
  }
}

}  // namespace wc
