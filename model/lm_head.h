// The LM head as the seed's Galaxy deployment ran it (seed 001 in docs/references.md, `padded_lmh`,
// `fracture_vocab`): the vocabulary is padded to a multiple of 512 rows and split into F fractures,
// each computed independently into its own buffer; the host concatenates them and drops the
// padding, so padded rows never reach sampling. Every logit is one dot product, so the result is
// bit-identical for any F.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm/packed_matrix.h"

namespace wc {

class FracturedLMHead {
 public:
  static constexpr int kPadMultiple = 512;

  // weights: [vocab, hidden], packed; must outlive this. Throws wc::Error if `fractures` does not
  // divide the padded vocabulary.
  FracturedLMHead(const PackedMatrix& weights, int fractures);

  // The padded vocabulary of `vocab` rows; throws wc::Error if `fractures` does not divide it into
  // slices of a multiple of 32 rows.
  static int PaddedVocab(int64_t vocab, int fractures);

  int vocab_size() const { return static_cast<int>(weights_->rows()); }
  int padded_vocab() const { return padded_vocab_; }
  int fractures() const { return fractures_; }

  // x: [n, hidden] f32 (after ln_f); logits: [n, vocab_size] f32.
  void Compute(const float* x, int64_t n, float* logits) const;

 private:
  const PackedMatrix* weights_;
  int fractures_;
  int padded_vocab_;
};

}  // namespace wc
