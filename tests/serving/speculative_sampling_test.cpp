// Verifying speculative proposals (Sampler::SampleVerify): greedy acceptance is the argmax and
// draws nothing; sampled verification keeps the model's distribution (chi-square over seeded
// draws), consumes one draw like Sample and returns Sample's token; a wrong rule is caught.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "serving/sampler.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

// The upper tail P(X >= chi2) of a chi-square variable with df degrees of freedom: the regularized
// upper incomplete gamma Q(df / 2, chi2 / 2), by its series below a + 1 and its continued fraction
// above (Numerical Recipes' gammq).
double ChiSquareSurvival(double chi2, int df) {
  const double a = df / 2.0, x = chi2 / 2.0;
  if (x <= 0) return 1.0;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000 && std::fabs(term) > std::fabs(sum) * 1e-16; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

// The model's distribution p over the vocabulary computed here from first principles (temperature,
// top-k, top-p, renormalize), not by the sampler. Logits must be distinct.
std::vector<double> ModelDistribution(const std::vector<float>& logits, const SamplingParams& sp) {
  const int vocab = static_cast<int>(logits.size());
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const int k = sp.top_k == 0 ? vocab : std::min(sp.top_k, vocab);
  std::vector<double> w(k);
  double sum = 0;
  for (int i = 0; i < k; ++i) {
    w[i] = std::exp((static_cast<double>(logits[order[i]]) - logits[order[0]]) / sp.temperature);
    sum += w[i];
  }
  int keep = 0;
  double mass = 0;
  while (keep < k) {
    mass += w[keep++] / sum;
    if (mass >= sp.top_p) break;
  }
  const double kept = std::accumulate(w.begin(), w.begin() + keep, 0.0);
  std::vector<double> p(vocab, 0.0);
  for (int i = 0; i < keep; ++i) p[order[i]] = w[i] / kept;
  return p;
}

// Pearson's chi-square of counts against n * p over the tokens p gives mass to; a token outside
// p's support that was drawn makes the p-value 0. Returns the p-value.
double GoodnessOfFit(const std::vector<long>& counts, const std::vector<double>& p, long n) {
  double chi2 = 0;
  int cells = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    if (p[t] == 0) {
      if (counts[t] != 0) return 0.0;
      continue;
    }
    const double expected = n * p[t];
    chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
    ++cells;
  }
  return cells < 2 ? 1.0 : ChiSquareSurvival(chi2, cells - 1);
}

constexpr double kSignificance = 1e-6;  // fixed seeds make the tests deterministic; this margin
                                        // keeps them passing for any other seed as well
constexpr long kDraws = 200000;

// Six tokens, distinct logits; the settings cover no truncation, temperature, top-k, top-p, both.
const std::vector<float> kLogits = {1.2f, -0.3f, 0.7f, 2.0f, 0.1f, -1.5f};
struct Setting {
  SamplingParams params;
  std::vector<int> proposals;  // the most likely token, others, one outside the kept set
};
const Setting kSettings[] = {
    {{1.0f, 0, 1.0f}, {3, 0, 5}},
    {{0.7f, 3, 1.0f}, {3, 2, 4}},   // top-3 keeps 3, 0, 2: proposal 4 is outside
    {{1.3f, 0, 0.8f}, {0, 3, 5}},   // top-p 0.8 drops the tail
    {{1.0f, 4, 0.75f}, {3, 0, 4}},  // top-k then top-p
    {{0.5f, 0, 1.0f}, {1, 3, 2}},
};

TEST(ChiSquare, SurvivalMatchesKnownValues) {
  // df 2 is exponential: Q = exp(-x / 2).
  EXPECT_NEAR(ChiSquareSurvival(2 * std::log(1e6), 2), 1e-6, 1e-12);
  EXPECT_NEAR(ChiSquareSurvival(3.0, 2), std::exp(-1.5), 1e-12);
  // Table values: the 1e-6 quantiles of df 1 and 5 are 23.928 and 35.888; the median of df 1 is
  // 0.45494.
  EXPECT_NEAR(ChiSquareSurvival(23.928, 1) / 1e-6, 1.0, 0.01);
  EXPECT_NEAR(ChiSquareSurvival(35.888, 5) / 1e-6, 1.0, 0.01);
  EXPECT_NEAR(ChiSquareSurvival(0.45494, 1), 0.5, 1e-4);
}

TEST(SpeculativeSampling, GreedyAcceptsExactlyTheArgmaxAndDrawsNothing) {
  Sampler s({0.0f, 5, 0.9f}, 1);
  const Rng::State before = s.rng_state();
  bool accepted = false;
  // Ties go to the lower id, as in Sample.
  const std::vector<float> tie = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.SampleVerify(tie.data(), 4, 1, &accepted), 1);
  EXPECT_TRUE(accepted);
  EXPECT_EQ(s.SampleVerify(tie.data(), 4, 3, &accepted), 1);
  EXPECT_FALSE(accepted);
  EXPECT_EQ(s.SampleVerify(tie.data(), 4, 0, &accepted), 1);
  EXPECT_FALSE(accepted);
  // A NaN is never the argmax, so a proposal there is rejected.
  const std::vector<float> with_nan = {NAN, 0.5f, 0.2f};
  EXPECT_EQ(s.SampleVerify(with_nan.data(), 3, 0, &accepted), 1);
  EXPECT_FALSE(accepted);
  EXPECT_EQ(s.SampleVerify(with_nan.data(), 3, 1, &accepted), 1);
  EXPECT_TRUE(accepted);
  const std::vector<float> all_nan = {NAN, NAN};
  EXPECT_THROW(s.SampleVerify(all_nan.data(), 2, 0, &accepted), Error);
  EXPECT_THROW(s.SampleVerify(tie.data(), 4, 4, &accepted), InternalError);
  // Random logits with ties (a coarse grid) and NaNs: always Sample's argmax.
  Rng rng(5);
  std::vector<float> logits(50);
  for (int i = 0; i < 2000; ++i) {
    for (float& l : logits) l = rng.Next() % 10 == 0 ? NAN : static_cast<float>(rng.Next() % 8);
    const int proposal = static_cast<int>(rng.Next() % 50);
    const int argmax = s.Sample(logits.data(), 50);
    ASSERT_EQ(s.SampleVerify(logits.data(), 50, proposal, &accepted), argmax);
    ASSERT_EQ(accepted, argmax == proposal);
  }
  EXPECT_EQ(s.rng_state(), before) << "greedy verification drew random numbers";
}

TEST(SpeculativeSampling, DistributionIsWhatSampleDrawsFrom) {
  // One draw u through Distribution + Draw selects the token Sample selects, bit for bit, and the
  // distribution's probabilities are the model's.
  for (const Setting& setting : kSettings) {
    Sampler sampler(setting.params, 77);
    Sampler by_hand(setting.params, 77);
    Rng draws(77);
    SamplingDistribution dist;
    by_hand.Distribution(kLogits.data(), 6, &dist);
    const std::vector<double> p = ModelDistribution(kLogits, setting.params);
    for (int t = 0; t < 6; ++t) EXPECT_NEAR(dist.Probability(t), p[t], 1e-12) << "token " << t;
    for (int i = 0; i < 5000; ++i)
      ASSERT_EQ(sampler.Sample(kLogits.data(), 6), dist.Draw(draws.Uniform()));
    EXPECT_EQ(by_hand.rng_state(), Sampler(setting.params, 77).rng_state()) << "Distribution drew";
  }
  // Greedy's distribution is the argmax alone.
  Sampler greedy({0.0f, 5, 0.9f}, 1);
  SamplingDistribution dist;
  greedy.Distribution(kLogits.data(), 6, &dist);
  EXPECT_EQ(dist.tokens, std::vector<int>{3});
  EXPECT_EQ(dist.Probability(3), 1.0);
}

TEST(SpeculativeSampling, SampledVerificationIsSampleWithOneDraw) {
  // The same seed: SampleVerify returns Sample's token and leaves the stream where Sample does, so
  // speculation changes neither the tokens nor the RNG stream of sampled decoding.
  Rng rng(9);
  std::vector<float> logits(64);
  for (const Setting& setting : kSettings) {
    Sampler plain(setting.params, 123), verifying(setting.params, 123);
    for (int i = 0; i < 3000; ++i) {
      for (float& l : logits) l = static_cast<float>(rng.Uniform() * 6 - 3);
      const int proposal = static_cast<int>(rng.Next() % 64);
      bool accepted = false;
      const int token = verifying.SampleVerify(logits.data(), 64, proposal, &accepted);
      ASSERT_EQ(token, plain.Sample(logits.data(), 64));
      ASSERT_EQ(accepted, token == proposal);
      ASSERT_EQ(verifying.rng_state(), plain.rng_state());
    }
  }
}

// SampleVerify's outputs over kDraws calls, with how many accepted.
std::vector<long> VerifyCounts(Sampler& s, int proposal, long* accepted_count) {
  std::vector<long> counts(6, 0);
  *accepted_count = 0;
  for (long i = 0; i < kDraws; ++i) {
    bool accepted = false;
    const int token = s.SampleVerify(kLogits.data(), 6, proposal, &accepted);
    ++counts[token];
    *accepted_count += accepted;
  }
  return counts;
}

TEST(SpeculativeSampling, OutputFollowsTheModelsDistribution) {
  // Chi-square of SampleVerify's output (accepted or resampled) against p, and of its acceptance
  // against p(proposal) = min(1, p / q) for a one-hot q, for every setting and proposal.
  uint64_t seed = 1000;
  for (const Setting& setting : kSettings) {
    const std::vector<double> p = ModelDistribution(kLogits, setting.params);
    for (const int proposal : setting.proposals) {
      Sampler s(setting.params, ++seed);
      long accepted = 0;
      const std::vector<long> counts = VerifyCounts(s, proposal, &accepted);
      EXPECT_GT(GoodnessOfFit(counts, p, kDraws), kSignificance)
          << "T " << setting.params.temperature << " top-k " << setting.params.top_k << " top-p "
          << setting.params.top_p << " proposal " << proposal;
      EXPECT_EQ(accepted, counts[proposal]);
      if (p[proposal] == 0) {
        EXPECT_EQ(accepted, 0);
      }
      EXPECT_GT(
          GoodnessOfFit({accepted, kDraws - accepted}, {p[proposal], 1 - p[proposal]}, kDraws),
          kSignificance);
    }
  }
}

// The textbook rule with two draws: accept with probability p(q); else resample from p with the
// proposal zeroed (when zero_proposal) or, wrongly, from p itself.
int TwoDrawVerify(const SamplingDistribution& dist, int proposal, bool zero_proposal, Rng& rng) {
  if (rng.Uniform() < dist.Probability(proposal)) return proposal;
  SamplingDistribution rest;
  for (size_t i = 0; i < dist.tokens.size(); ++i) {
    if (zero_proposal && dist.tokens[i] == proposal) continue;
    rest.tokens.push_back(dist.tokens[i]);
    rest.weights.push_back(dist.weights[i]);
    rest.total += dist.weights[i];
  }
  return rest.Draw(rng.Uniform());
}

TEST(SpeculativeSampling, TheTestCatchesAWrongRule) {
  // Resampling without zeroing the proposal over-draws it (p + (1 - p) p): the same chi-square
  // rejects it far below the threshold, while the textbook two-draw rule passes, as SampleVerify
  // does.
  const SamplingParams params{1.0f, 0, 1.0f};
  const std::vector<double> p = ModelDistribution(kLogits, params);
  Sampler sampler(params, 1);
  SamplingDistribution dist;
  sampler.Distribution(kLogits.data(), 6, &dist);
  for (const int proposal : {3, 0, 2}) {
    Rng right_rng(42), wrong_rng(42);
    std::vector<long> right(6, 0), wrong(6, 0);
    for (long i = 0; i < kDraws; ++i) {
      ++right[TwoDrawVerify(dist, proposal, true, right_rng)];
      ++wrong[TwoDrawVerify(dist, proposal, false, wrong_rng)];
    }
    EXPECT_GT(GoodnessOfFit(right, p, kDraws), kSignificance) << "proposal " << proposal;
    EXPECT_LT(GoodnessOfFit(wrong, p, kDraws), kSignificance) << "proposal " << proposal;
  }
  // Accepting every proposal is caught too, even for the most likely token.
  std::vector<long> always(6, 0);
  always[3] = kDraws;
  EXPECT_LT(GoodnessOfFit(always, p, kDraws), kSignificance);
}

}  // namespace
}  // namespace wc
