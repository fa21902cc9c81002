#include "meshmodel/speculation.h"

#include <cmath>

#include "util/error.h"

namespace wc {

double ExpectedTokensPerStep(int k, double a) {
  if (k < 0) throw Error(Cat("proposals per verify step must be >= 0, got ", k));
  if (!(a >= 0.0 && a <= 1.0)) throw Error(Cat("acceptance must be in [0, 1], got ", a));
  if (a == 1.0) return k + 1.0;
  return (1.0 - std::pow(a, k + 1)) / (1.0 - a);
}

std::vector<SpeculationPoint> SpeculationWhatIf(const ModelConfig& c, const DecodeStepOptions& base,
                                                const std::vector<int>& ks,
                                                const std::vector<double>& acceptances) {
  if (base.phase != TtPhase::kDecode)
    throw Error("speculative decoding is a decode what-if; prefill has no verify step");
  DecodeStepOptions o = base;
  o.flash_decode = true;
  o.tokens_per_user = 1;
  const double plain_us = EstimateDecodeStep(c, o).step_us;
  std::vector<SpeculationPoint> out;
  SpeculationPoint p0;
  p0.step_us = plain_us;
  p0.tokens_per_s_per_user = 1e6 / plain_us;
  out.push_back(p0);
  for (int k : ks) {
    if (k < 1) throw Error(Cat("proposals per verify step must be >= 1, got ", k));
    o.tokens_per_user = k + 1;
    const double step_us = EstimateDecodeStep(c, o).step_us;
    for (double a : acceptances) {
      SpeculationPoint p;
      p.k = k;
      p.acceptance = a;
      p.step_us = step_us;
      p.expected_tokens = ExpectedTokensPerStep(k, a);
      p.tokens_per_s_per_user = p.expected_tokens * 1e6 / step_us;
      p.speedup = p.tokens_per_s_per_user / p0.tokens_per_s_per_user;
      out.push_back(p);
    }
  }
  return out;
}

std::vector<SpeculationPoint> DefaultSpeculationWhatIf(const ModelConfig& c,
                                                       const DecodeStepOptions& base) {
  return SpeculationWhatIf(c, base, {2, 4, 8}, {0.5, 0.7, 0.9});
}

}  // namespace wc
