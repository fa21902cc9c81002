// ALiBi (Press et al., "Train Short, Test Long", 2022): a linear position bias instead of rotary
// embeddings. Query head h's raw score against the key at position j gains slope[h] * j before the
// scores are scaled by 1/sqrt(head_dim); a query at position i attends j <= i, so this equals the
// paper's -slope * (i - j) up to a per-row constant that softmax removes - in exact arithmetic.
// In floats it does not: the bias is what the model was trained with, so it is computed as its
// reference computes it. With `bf16` (Hugging Face's Falcon: build_alibi_tensor multiplies the
// slope rounded to bf16 by the position rounded to bf16 and rounds the product to bf16, whatever
// the model's dtype) every factor and the product are rounded so; positions above 256 then round
// (257 -> 256), which the trained model expects.
#pragma once

#include <cstdint>
#include <vector>

namespace wc {

struct AlibiBias {
  const float* slopes = nullptr;  // [n_q_heads] of the op; null: no bias
  bool bf16 = false;              // round slope, position and product to bf16 (HF Falcon)

  bool enabled() const { return slopes != nullptr; }
  // The bias head h (an index into `slopes`) adds to its raw score against key position `pos`.
  float At(int h, int64_t pos) const;
};

// The slopes of `n_heads` heads as HF's build_alibi_tensor computes them in float32: for the
// largest power of two c <= n_heads, base = 2^(-8 / c) and slope[h] = base^(h + 1) for h < c;
// heads past c take the odd powers 1, 3, 5, ... of 2^(-4 / c). [n_heads]
std::vector<float> AlibiSlopes(int n_heads);

}  // namespace wc
