#include "serving/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/error.h"

namespace wc {

void SamplingParams::Validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    throw Error(Cat("--temperature must be a finite number >= 0 (0 = greedy), got ", temperature));
  if (top_k < 0) throw Error(Cat("--top-k must be >= 0 (0 = no limit), got ", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) throw Error(Cat("--top-p must be in (0, 1], got ", top_p));
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

void Sampler::Distribution(const float* logits, int vocab, SamplingDistribution* dist) {
  WC_CHECK(vocab > 0, "empty vocabulary");
  if (params_.temperature == 0.0f) {
    dist->tokens.assign(1, Argmax(logits, vocab));
    dist->weights.assign(1, 1.0);
    dist->total = 1.0;
    return;
  }
  const int k = params_.top_k == 0 ? vocab : std::min(params_.top_k, vocab);
  order_.resize(vocab);
  std::iota(order_.begin(), order_.end(), 0);
  std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), Better{logits});
  if (std::isnan(logits[order_[0]]))
    throw Error("all logits are NaN; the model produced no number");
  // Softmax of logits / T over the top k, in double.
  std::vector<double>& probs = dist->weights;
  probs.assign(k, 0.0);
  const double top = logits[order_[0]];
  double sum = 0.0;
  int n = 0;
  for (; n < k && !std::isnan(logits[order_[n]]); ++n) {
    probs[n] = std::exp((logits[order_[n]] - top) / params_.temperature);
    sum += probs[n];
  }
  // Top-p: the smallest prefix whose mass reaches top_p (at least one token).
  double mass = 0.0;
  int keep = 0;
  while (keep < n) {
    mass += probs[keep] / sum;
    ++keep;
    if (mass >= params_.top_p) break;
  }
  probs.resize(keep);
  dist->tokens.assign(order_.begin(), order_.begin() + keep);
  double kept = 0.0;
  for (int i = 0; i < keep; ++i) kept += probs[i];
  dist->total = kept;
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
