// The LM head as the seed's Galaxy deployment ran it (../shared/seeds/001, `padded_lmh`,
// `fracture_vocab`): the vocabulary is padded to a multiple of 512 rows and split into F fractures,
// each computed independently into its own buffer; the host concatenates them and drops the
// padding, so padded rows never reach sampling. Every logit is one dot product, so the result is
// bit-identical for any F.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace wc {

class FracturedLMHead {
 public:
  static constexpr int kPadMultiple = 512;

  // weights: [vocab, hidden]. Throws wc::Error if `fractures` does not divide the padded
  // vocabulary.
  FracturedLMHead(const MatrixRef& weights, int fractures);

  int vocab_size() const { return static_cast<int>(weights_.rows); }
  int padded_vocab() const { return padded_vocab_; }
  int fractures() const { return fractures_; }

  // x: [n, hidden] f32 (after ln_f); logits: [n, vocab_size] f32.
  void Compute(const float* x, int64_t n, float* logits) const;

 private:
  MatrixRef weights_;
  int fractures_;
  int padded_vocab_;
};

}  // namespace wc
