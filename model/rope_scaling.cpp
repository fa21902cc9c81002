#include "model/rope_scaling.h"

#include <cmath>

namespace wc {

std::vector<double> RopeInvFreq(const ModelConfig& c) {
  const int d = c.head_dim();
  std::vector<double> inv(static_cast<size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) inv[i] = 1.0 / std::pow(c.rope_theta, (2.0 * i) / d);
  const RopeScaling& s = c.rope_scaling;
  switch (s.kind) {
    case RopeScaling::Kind::kNone:
      break;
    case RopeScaling::Kind::kLinear:
      for (double& f : inv) f /= s.factor;
      break;
    case RopeScaling::Kind::kLlama3: {
      const double pi = 3.14159265358979323846, old_len = s.original_max_position_embeddings;
      const double low_wavelen = old_len / s.low_freq_factor;
      const double high_wavelen = old_len / s.high_freq_factor;
      for (double& f : inv) {
        const double wavelen = 2 * pi / f;
        if (wavelen < high_wavelen) continue;  // high frequencies kept
        if (wavelen > low_wavelen) {           // low frequencies scaled
          f /= s.factor;
          continue;
        }
        const double smooth =
            (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
      break;
    }
  }
  return inv;
}

}  // namespace wc
