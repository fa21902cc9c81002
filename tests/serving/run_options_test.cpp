// The run options' one declaration (serving/run_options.h): what each accepts, how it says so,
// and that the objects' own checks (SamplingParams, BeamParams, a transcript's settings) are its.
#include "serving/run_options.h"

#include <gtest/gtest.h>

#include "serving/beam_search.h"
#include "serving/conversation.h"
#include "serving/sampler.h"
#include "serving/transcript.h"
#include "util/error.h"

namespace wc {
namespace {

using namespace run_option;

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RunOptions, SayWhatTheyAccept) {
  EXPECT_EQ(kTemperature.Accepts(), "a number >= 0 (0 = greedy)");
  EXPECT_EQ(kTopK.Accepts(), "a whole number >= 0 (0 = no limit)");
  EXPECT_EQ(kTopP.Accepts(), "a number in (0, 1] (1 = off)");
  EXPECT_EQ(kSeed.Accepts(), "a whole number in [0, 2^64)");
  EXPECT_EQ(kSpeculate.Accepts(), "off, lookup or draft");
  EXPECT_EQ(kSpeculateK.Accepts(), "a whole number in 1-16");
  EXPECT_EQ(kEarlyStopping.Accepts(), "true or false");
  EXPECT_EQ(kBeams.Accepts(), "a whole number in 0-16 (0 = sample)");
}

TEST(RunOptions, HoldOnlyTheirValues) {
  EXPECT_TRUE(kTopP.Holds(1));
  EXPECT_TRUE(kTopP.Holds(0.01));
  EXPECT_FALSE(kTopP.Holds(0));  // (0, 1]: 0 itself is refused
  EXPECT_FALSE(kTopP.Holds(1.0000001));
  EXPECT_TRUE(kTemperature.Holds(0));
  EXPECT_FALSE(kTemperature.Holds(-0.5));
  EXPECT_FALSE(kTemperature.Holds(std::nan("")));
  EXPECT_FALSE(kTemperature.Holds(INFINITY));
  EXPECT_FALSE(kTopK.Holds(2.5));  // a count is whole
  EXPECT_TRUE(kSpeculateK.Holds(16));
  EXPECT_FALSE(kSpeculateK.Holds(17));
  EXPECT_FALSE(kSpeculateK.Holds(0));
  EXPECT_TRUE(kMaxNewTokensOption.Holds(0));  // only read the prompt
}

TEST(RunOptions, ParseTextOrRefuseNamingTheLabel) {
  EXPECT_EQ(kTopP.ParseNumber("0.5", "--top-p"), 0.5);
  EXPECT_EQ(ErrorOf([] { kTopP.ParseNumber("2", "--top-p"); }),
            "--top-p must be a number in (0, 1] (1 = off), got 2");
  EXPECT_EQ(ErrorOf([] { kTopK.ParseNumber("5x", "top_k"); }),
            "top_k must be a whole number >= 0 (0 = no limit), got 5x");
  EXPECT_EQ(ErrorOf([] { kTemperature.ParseNumber("", "t"); }),
            "t must be a number >= 0 (0 = greedy), got nothing");
  EXPECT_EQ(ErrorOf([] { kTemperature.ParseNumber("1e999", "t"); }),
            "t must be a number >= 0 (0 = greedy), got 1e999");
  EXPECT_EQ(kSeed.ParseSeed("18446744073709551615", "seed"), 18446744073709551615ull);
  EXPECT_EQ(ErrorOf([] { kSeed.ParseSeed("18446744073709551616", "seed"); }),
            "seed must be a whole number in [0, 2^64), got 18446744073709551616");
  EXPECT_EQ(kSpeculate.ParseChoice("draft", "s"), "draft");
  EXPECT_EQ(ErrorOf([] { kSpeculate.ParseChoice("Draft", "s"); }),
            "s must be off, lookup or draft, got Draft");
  EXPECT_TRUE(kEarlyStopping.ParseSwitch("true", "e"));
  EXPECT_EQ(kTopP.ParseText("0.90", "p"), "0.9");
  EXPECT_EQ(kTopP.DefaultText(), "0.9");
  EXPECT_EQ(kSpeculate.DefaultText(), "lookup");
}

TEST(RunOptions, EveryOptionIsFoundByItsNameOnce) {
  for (const RunOptionSpec* o : RunOptions()) {
    EXPECT_EQ(FindRunOption(o->name), o) << o->name;
    int same = 0;
    for (const RunOptionSpec* p : RunOptions()) same += std::string(p->name) == o->name;
    EXPECT_EQ(same, 1) << o->name;
  }
  EXPECT_EQ(FindRunOption("temprature"), nullptr);
}

// The structs start from the declared defaults, and their own checks are the declaration's.
TEST(RunOptions, ObjectsTakeTheirDefaultsAndChecksFromTheDeclaration) {
  const SamplingParams s;
  EXPECT_EQ(s.temperature, static_cast<float>(kTemperature.default_number));
  EXPECT_EQ(s.top_k, static_cast<int>(kTopK.default_number));
  EXPECT_EQ(s.top_p, static_cast<float>(kTopP.default_number));
  EXPECT_EQ(ConversationSettings().max_new_tokens, kDefaultMaxNewTokens);
  SamplingParams bad;
  bad.top_p = 0;
  EXPECT_EQ(ErrorOf([&] { bad.Validate(); }), kTopP.Refusal("--top-p", "0"));
  BeamParams b;
  b.length_penalty = -1;
  EXPECT_EQ(ErrorOf([&] { b.Validate(); }), kLengthPenalty.Refusal("--length-penalty", "-1"));
  ConversationSettings c;
  EXPECT_EQ(ErrorOf([&] { ApplySetting(c, "top-k", "-1"); }), kTopK.Refusal("top-k", "-1"));
  EXPECT_EQ(ErrorOf([&] { ApplySetting(c, "beams", "17"); }), kBeams.Refusal("beams", "17"));
  ApplySetting(c, "seed", "18446744073709551615");
  EXPECT_EQ(c.seed, 18446744073709551615ull);
}

}  // namespace
}  // namespace wc
