// What speculative decoding would make of the whole decode step on a Wormhole mesh
// (meshmodel/decode_step.h): a verify step of k proposals runs k + 1 tokens per user - users x
// (k + 1) rows through every matmul and per-row op, FlashDecode with k + 1 causal queries per user
// reading the user's KV once - and yields, with per-token acceptance a, the accepted prefix plus
// the one token sampled after it: E = (1 - a^(k+1)) / (1 - a) tokens (k + 1 when a = 1).
// tokens/s/user = E / step time. The step times are the decode-step model's (no separate cost
// formula); acceptance is an assumption of the what-if, not a measurement. Estimates, not
// measurements of hardware.
#pragma once

#include <vector>

#include "meshmodel/decode_step.h"
#include "model/config.h"

namespace wc {

// Expected tokens a verify step of k proposals yields at per-token acceptance a in [0, 1]:
// sum_{i=0..k} a^i. k = 0: 1 (plain decode). Throws wc::Error for k < 0 or a outside [0, 1].
double ExpectedTokensPerStep(int k, double a);

struct SpeculationPoint {
  int k = 0;              // proposals per verify step (0: plain decode)
  double acceptance = 0;  // per-token acceptance assumed
  double step_us = 0;     // the verify step (k + 1 tokens a user)
  double expected_tokens = 1;
  double tokens_per_s_per_user = 0;  // expected_tokens x 1e6 / step_us
  double speedup = 1;                // over plain decode's tokens/s/user (the k = 0 step)
};

// The step of `base` (its attention made FlashDecode: a verify step needs it) at k = 0 and at each
// of `ks`, each at every acceptance of `acceptances`: k = 0 first (once, acceptance 0), then the
// ks in order, acceptances in order within each. Throws wc::Error as EstimateDecodeStep does
// (k + 1 outside [1, 17], a prefill base) or for an acceptance outside [0, 1].
std::vector<SpeculationPoint> SpeculationWhatIf(const ModelConfig& c, const DecodeStepOptions& base,
                                                const std::vector<int>& ks,
                                                const std::vector<double>& acceptances);

// The table: k = 2, 4, 8 at acceptance 0.5, 0.7, 0.9.
std::vector<SpeculationPoint> DefaultSpeculationWhatIf(const ModelConfig& c,
                                                       const DecodeStepOptions& base);

}  // namespace wc
