// Sampling: greedy, top-k, top-p, temperature, seeds, and the RNG's cross-machine stream.
#include <cmath>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "serving/sampler.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

TEST(Rng, StreamIsFixedForASeed) {
  // Golden values: the same on every machine and compiler (the project's own generator).
  Rng a(0), b(0), c(1);
  const uint64_t first = a.Next();
  EXPECT_EQ(first, b.Next());
  EXPECT_NE(first, c.Next());
  EXPECT_EQ(first, 0x99ec5f36cb75f2b4ull);
  for (int i = 0; i < 1000; ++i) {
    const double u = a.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler s({0.0f, 5, 0.9f}, 1);
  const std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.Sample(logits.data(), 4), 1);
  const std::vector<float> with_nan = {NAN, 0.5f, 0.2f};
  EXPECT_EQ(s.Sample(with_nan.data(), 3), 1);
  const std::vector<float> all_nan = {NAN, NAN};
  EXPECT_THROW(s.Sample(all_nan.data(), 2), Error);
}

TEST(Sampler, TopKOneIsGreedy) {
  Sampler s({1.0f, 1, 1.0f}, 7);
  const std::vector<float> logits = {0.0f, 0.5f, 0.4f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.Sample(logits.data(), 3), 1);
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 0.37f);
  auto draw = [&](uint64_t seed) {
    Sampler s({1.0f, 0, 1.0f}, seed);
    std::vector<int> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.Sample(logits.data(), 100));
    return out;
  };
  EXPECT_EQ(draw(3), draw(3));
  EXPECT_NE(draw(3), draw(4));
}

TEST(Sampler, FrequenciesFollowTheTemperedSoftmaxOfTheTopK) {
  // logits ln(4), ln(3), ln(2), ln(1): softmax 0.4, 0.3, 0.2, 0.1; top-k 3 renormalizes to
  // 4/9, 3/9, 2/9 and never draws id 3.
  const std::vector<float> logits = {std::log(4.f), std::log(3.f), std::log(2.f), std::log(1.f)};
  Sampler s({1.0f, 3, 1.0f}, 11);
  std::map<int, int> counts;
  const int n = 90000;
  for (int i = 0; i < n; ++i) ++counts[s.Sample(logits.data(), 4)];
  EXPECT_EQ(counts[3], 0);
  EXPECT_NEAR(counts[0] / double(n), 4.0 / 9, 0.01);
  EXPECT_NEAR(counts[1] / double(n), 3.0 / 9, 0.01);
  EXPECT_NEAR(counts[2] / double(n), 2.0 / 9, 0.01);
  // Temperature 2 flattens: p ~ sqrt(4), sqrt(3), sqrt(2), 1.
  Sampler hot({2.0f, 0, 1.0f}, 12);
  counts.clear();
  for (int i = 0; i < n; ++i) ++counts[hot.Sample(logits.data(), 4)];
  const double z = 2 + std::sqrt(3.0) + std::sqrt(2.0) + 1;
  EXPECT_NEAR(counts[3] / double(n), 1 / z, 0.01);
  EXPECT_NEAR(counts[0] / double(n), 2 / z, 0.01);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // 0.4 + 0.3 = 0.7 >= 0.65: only ids 0 and 1 remain.
  const std::vector<float> logits = {std::log(4.f), std::log(3.f), std::log(2.f), std::log(1.f)};
  Sampler s({1.0f, 0, 0.65f}, 5);
  std::map<int, int> counts;
  for (int i = 0; i < 20000; ++i) ++counts[s.Sample(logits.data(), 4)];
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_NEAR(counts[0] / 20000.0, 4.0 / 7, 0.015);
}

TEST(Sampler, InvalidParametersNameTheFlag) {
  auto msg = [](SamplingParams p) {
    try {
      p.Validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg({-1.0f, 5, 0.9f}).find("--temperature"), std::string::npos);
  EXPECT_NE(msg({NAN, 5, 0.9f}).find("--temperature"), std::string::npos);
  EXPECT_NE(msg({1.0f, -2, 0.9f}).find("--top-k"), std::string::npos);
  EXPECT_NE(msg({1.0f, 5, 0.0f}).find("--top-p"), std::string::npos);
  EXPECT_NE(msg({1.0f, 5, 1.5f}).find("--top-p"), std::string::npos);
  EXPECT_EQ(msg({0.0f, 0, 1.0f}), "");
}

}  // namespace
}  // namespace wc
