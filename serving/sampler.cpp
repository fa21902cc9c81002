#include "serving/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "serving/run_options.h"
#include "util/error.h"

namespace wc {

void SamplingParams::Validate() const {
  run_option::kTemperature.Check(temperature, "--temperature");
  run_option::kTopK.Check(top_k, "--top-k");
  run_option::kTopP.Check(top_p, "--top-p");
}

Sampler::Sampler(const SamplingParams& params, uint64_t seed) : params_(params), rng_(seed) {
  params_.Validate();
}

void Sampler::set_params(const SamplingParams& params) {
  params.Validate();
  params_ = params;
}

namespace {

// Higher logit first, lower id on ties; NaN last.
struct Better {
  const float* logits;
  bool operator()(int a, int b) const {
    const float la = logits[a], lb = logits[b];
    const bool na = std::isnan(la), nb = std::isnan(lb);
    if (na || nb) return na == nb ? a < b : nb;  // numbers before NaN
    return la > lb || (la == lb && a < b);
  }
};

}  // namespace

double SamplingDistribution::Probability(int token) const {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] == token) return weights[i] / total;
  return 0.0;
}

int SamplingDistribution::Draw(double u) const {
  WC_CHECK(!tokens.empty(), "drawing from an empty distribution");
  const double x = u * total;
  double acc = 0.0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    acc += weights[i];
    if (x < acc) return tokens[i];
  }
  return tokens.back();
}

int Sampler::Argmax(const float* logits, int vocab) const {
  const Better better{logits};
  int best = 0;
  for (int i = 1; i < vocab; ++i)
    if (better(i, best)) best = i;
  if (std::isnan(logits[best])) throw Error("all logits are NaN; the model produced no number");
  return best;
}

// The chain's stages, in order. Each reads what the one before left in `order_` / `dist`.

int Sampler::KeepTopK(const float* logits, int vocab) {
  const int k = params_.top_k == 0 ? vocab : std::min(params_.top_k, vocab);
  order_.resize(vocab);
  std::iota(order_.begin(), order_.end(), 0);
  std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), Better{logits});
  if (std::isnan(logits[order_[0]]))
    throw Error("all logits are NaN; the model produced no number");
  return k;
}

double Sampler::WeighByTemperature(const float* logits, int k, SamplingDistribution* dist) const {
  // Softmax numerators of logits / T over the candidates, in double; NaN logits (sorted last)
  // end the list.
  std::vector<double>& weights = dist->weights;
  weights.assign(k, 0.0);
  const double top = logits[order_[0]];
  double sum = 0.0;
  int n = 0;
  for (; n < k && !std::isnan(logits[order_[n]]); ++n) {
    weights[n] = std::exp((logits[order_[n]] - top) / params_.temperature);
    sum += weights[n];
  }
  weights.resize(n);
  return sum;
}

void Sampler::KeepTopP(double sum, SamplingDistribution* dist) const {
  // The smallest prefix whose mass reaches top_p (at least one token).
  std::vector<double>& weights = dist->weights;
  const int n = static_cast<int>(weights.size());
  double mass = 0.0;
  int keep = 0;
  while (keep < n) {
    mass += weights[keep] / sum;
    ++keep;
    if (mass >= params_.top_p) break;
  }
  weights.resize(keep);
  dist->tokens.assign(order_.begin(), order_.begin() + keep);
  double kept = 0.0;
  for (int i = 0; i < keep; ++i) kept += weights[i];
  dist->total = kept;
}

void Sampler::Distribution(const float* logits, int vocab, SamplingDistribution* dist) {
  WC_CHECK(vocab > 0, "empty vocabulary");
  if (params_.temperature == 0.0f) {  // greedy: the chain's limit, the argmax alone
    dist->tokens.assign(1, Argmax(logits, vocab));
    dist->weights.assign(1, 1.0);
    dist->total = 1.0;
    return;
  }
  const int k = KeepTopK(logits, vocab);
  const double sum = WeighByTemperature(logits, k, dist);
  KeepTopP(sum, dist);
}

int Sampler::Sample(const float* logits, int vocab) {
  WC_CHECK(vocab > 0, "empty vocabulary");
  if (params_.temperature == 0.0f) return Argmax(logits, vocab);
  Distribution(logits, vocab, &dist_);
  return dist_.Draw(rng_.Uniform());
}

int Sampler::SampleVerify(const float* logits, int vocab, int proposal, bool* accepted) {
  WC_CHECK(proposal >= 0 && proposal < vocab, "proposal ", proposal, " outside the vocabulary of ",
           vocab);
  const int token = Sample(logits, vocab);
  *accepted = token == proposal;
  return token;
}

}  // namespace wc
