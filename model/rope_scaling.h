// RoPE's frequencies from rope_theta and HF's rope_scaling (modeling_rope_utils.py):
//   inv_freq[i] = theta^(-2i / head_dim), i < head_dim / 2, then
//   linear:  inv_freq[i] / factor
//   llama3:  wavelength 2 pi / inv_freq[i] against original_max_position_embeddings (O):
//            below O / high_freq_factor kept, above O / low_freq_factor divided by factor, and
//            between them (1 - s) inv_freq / factor + s inv_freq, s = (O / wavelength - low) /
//            (high - low).
// Neither scales cos and sin (HF's attention_factor is 1 for both).
#pragma once

#include <vector>

#include "model/config.h"

namespace wc {

// [head_dim / 2] frequencies for `c` (its head_dim, rope_theta and rope_scaling), in double.
std::vector<double> RopeInvFreq(const ModelConfig& c);

}  // namespace wc
