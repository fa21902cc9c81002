// Element-wise and row-wise operations of the decoder (FP32 activations).
#pragma once

#include <cstdint>
#include <vector>

namespace wc {

// y[i] = (x[i] - mean) / sqrt(var + eps) * gamma[i] + beta[i] over one row of n values.
void LayerNorm(const float* x, const float* gamma, const float* beta, float eps, float* y,
               int64_t n);

// y[i] = x[i] / sqrt(mean(x^2) + eps) * gamma[i] over one row of n values (HF LlamaRMSNorm: the
// mean of squares in float, as PyTorch reduces it; here summed in double).
void RmsNorm(const float* x, const float* gamma, float eps, float* y, int64_t n);

// Exact (erf) GELU: 0.5 x (1 + erf(x / sqrt 2)), in place, vectorized and over threads
// (kernels/gelu.cpp): relative error below 1e-6 against the exact function.
void GeluErf(float* x, int64_t n);

// gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)): SwiGLU's product, vectorized and
// over threads (kernels/silu.cpp): within 2 ulp of the exact function.
void SiluMul(float* gate, const float* up, int64_t n);

// Rotary embedding tables, GPT-NeoX rotate-half form:
//   inv_freq[i] = theta^(-2i / head_dim), angle = pos * inv_freq[i], for i < head_dim / 2.
class Rope {
 public:
  Rope(int head_dim, double theta);
  // Given frequencies (a scaled RoPE's: model/rope_scaling.h).  inv_freq: [head_dim / 2]
  Rope(int head_dim, const std::vector<double>& inv_freq);
  // Rotates one head vector in place: x' = x * cos + rotate_half(x) * sin, where
  // rotate_half(x) = [-x[d/2:], x[:d/2]].  x: [head_dim]
  void Apply(float* x, int pos) const;
  int head_dim() const { return head_dim_; }

 private:
  int head_dim_;
  float inv_freq_[512];  // [head_dim / 2]
};

// In-place softmax over n values; returns nothing. n >= 1.
void Softmax(float* x, int64_t n);

}  // namespace wc
