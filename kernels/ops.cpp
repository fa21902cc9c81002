#include "kernels/ops.h"

#include <cmath>

#include "util/error.h"

namespace wc {

void LayerNorm(const float* x, const float* gamma, const float* beta, float eps, float* y,
               int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    sq += d * d;
  }
  const float rstd = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
}

void RmsNorm(const float* x, const float* gamma, float eps, float* y, int64_t n) {
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(x[i]) * x[i];
  const float rstd = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = gamma[i] * (x[i] * rstd);
}

Rope::Rope(int head_dim, const std::vector<double>& inv_freq) : head_dim_(head_dim) {
  WC_CHECK(head_dim % 2 == 0 && head_dim / 2 <= 512 &&
               inv_freq.size() == static_cast<size_t>(head_dim / 2),
           "head_dim ", head_dim);
  for (int i = 0; i < head_dim / 2; ++i) inv_freq_[i] = static_cast<float>(inv_freq[i]);
}

Rope::Rope(int head_dim, double theta) : head_dim_(head_dim) {
  WC_CHECK(head_dim % 2 == 0 && head_dim / 2 <= 512, "head_dim ", head_dim);
  for (int i = 0; i < head_dim / 2; ++i)
    inv_freq_[i] = static_cast<float>(1.0 / std::pow(theta, (2.0 * i) / head_dim));
}

void Rope::Apply(float* x, int pos) const {
  const int half = head_dim_ / 2;
  for (int i = 0; i < half; ++i) {
    // Angle in float as PyTorch computes it (pos * inv_freq in fp32), then cos/sin.
    const float angle = static_cast<float>(pos) * inv_freq_[i];
    const float c = std::cos(angle), s = std::sin(angle);
    const float x0 = x[i], x1 = x[i + half];
    x[i] = x0 * c - x1 * s;
    x[i + half] = x1 * c + x0 * s;
  }
}

void Softmax(float* x, int64_t n) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace wc
