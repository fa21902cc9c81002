// The OpenAI request body parser (app/openai/openai_body.h), as batch and serve use it.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "app/openai/openai_body.h"
#include "app/openai/openai_request.h"
#include "serving/run_options.h"

namespace wc {
namespace {

using nlohmann::json;

OpenAIBodyLimits Http() {
  OpenAIBodyLimits l;
  l.max_sampled_n = 8;
  l.max_messages = 4;
  l.allow_stream = true;
  return l;
}

// The error's param and message for `body`.
std::pair<std::string, std::string> Fails(const json& body, bool chat, OpenAIBodyLimits l) {
  try {
    ParseOpenAIBody(body, chat, l);
  } catch (const OpenAIFieldError& e) {
    return {e.param(), e.what()};
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return {};
}

TEST(OpenAIBody, ReadsEveryFieldAndTheNewerNames) {
  const json body = {{"messages",
                      {{{"role", "developer"}, {"content", "Be brief."}},
                       {{"role", "user"},
                        {"content", json::array({{{"type", "text"}, {"text", "a"}},
                                                 {{"type", "text"}, {"text", "b"}}})}}}},
                     {"max_completion_tokens", 17},
                     {"temperature", 0.5},
                     {"top_p", 0.9},
                     {"top_k", -1},
                     {"seed", 3},
                     {"stop", "x"},
                     {"n", 2},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}},
                     {"user", "ignored"}};
  const OpenAIBody b = ParseOpenAIBody(body, /*chat=*/true, Http());
  ASSERT_EQ(b.messages.size(), 2u);
  EXPECT_EQ(b.messages[0].role, ChatMessage::Role::kSystem);
  EXPECT_EQ(b.messages[1].content, "ab");
  EXPECT_EQ(b.max_tokens, 17);
  EXPECT_FLOAT_EQ(*b.temperature, 0.5f);
  EXPECT_EQ(b.top_k, 0);
  EXPECT_EQ(b.seed, 3u);
  ASSERT_TRUE(b.stop.has_value());
  EXPECT_EQ(b.stop->at(0), "x");
  EXPECT_EQ(b.n, 2);
  EXPECT_TRUE(b.stream);
  EXPECT_TRUE(b.include_usage);
  json both = body;
  both["max_tokens"] = 5;  // the older name wins over max_completion_tokens
  EXPECT_EQ(ParseOpenAIBody(both, true, Http()).max_tokens, 5);
}

TEST(OpenAIBody, NamesTheWrongFieldWithTheFrontEndsPrefix) {
  OpenAIBodyLimits batch;
  batch.prefix = "body.";
  const auto [p1, m1] = Fails({{"prompt", "x"}, {"max_tokens", -2}}, false, batch);
  EXPECT_EQ(p1, "max_tokens");
  EXPECT_EQ(m1, "body.max_tokens must be a whole number >= 0 (0 = only read the prompt), got -2");
  const auto [p2, m2] = Fails({{"prompt", "x"}, {"stream", true}}, false, batch);
  EXPECT_EQ(p2, "stream");
  const auto [p3, m3] =
      Fails({{"messages", json::array({{{"role", "user"}, {"content", 5}}})}}, true, Http());
  EXPECT_EQ(p3, "messages[0].content");
  EXPECT_EQ(m3, "messages[0].content must be a string or an array of text parts, got 5");
  json five = {{"messages", json::array()}};
  for (int i = 0; i < 5; ++i) five["messages"].push_back({{"role", "user"}, {"content", "x"}});
  EXPECT_EQ(Fails(five, true, Http()).first, "messages");
  EXPECT_EQ(Fails({{"prompt", "x"}, {"n", 9}}, false, Http()).first, "n");
  EXPECT_EQ(
      Fails({{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}, false, Http()).first,
      "stream_options");
  EXPECT_EQ(Fails({{"prompt", json::array({1, -1})}}, false, Http()).first, "prompt[1]");
}

TEST(OpenAIBody, ChoiceSeedsKeepTheFirstAndDifferAfter) {
  EXPECT_EQ(ChoiceSeed(42, 0), 42u);
  EXPECT_NE(ChoiceSeed(42, 1), ChoiceSeed(42, 2));
  EXPECT_NE(ChoiceSeed(42, 1), ChoiceSeed(43, 1));
  EXPECT_EQ(ChoiceSeed(42, 1), ChoiceSeed(42, 1));
}

TEST(OpenAIBody, LogprobsAreAFlagForChatAndACountForCompletions) {
  OpenAIBodyLimits http = Http();
  http.allow_logprobs = true;
  const json msgs = json::array({{{"role", "user"}, {"content", "x"}}});
  const OpenAIBody chat =
      ParseOpenAIBody({{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 20}}, true, http);
  EXPECT_TRUE(chat.logprobs);
  EXPECT_EQ(chat.top_logprobs, 20);
  const OpenAIBody comp = ParseOpenAIBody({{"prompt", "x"}, {"logprobs", 0}}, false, http);
  EXPECT_TRUE(comp.logprobs);
  EXPECT_EQ(comp.top_logprobs, 0);
  EXPECT_EQ(Fails({{"messages", msgs}, {"top_logprobs", 2}}, true, http).first, "top_logprobs");
  EXPECT_EQ(Fails({{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 21}}, true, http).first,
            "top_logprobs");
  EXPECT_EQ(Fails({{"prompt", "x"}, {"logprobs", true}}, false, http).first, "logprobs");
  EXPECT_EQ(Fails({{"prompt", "x"}, {"logprobs", 1}, {"num_beams", 2}}, false, http).first,
            "logprobs");
  OpenAIBodyLimits batch;
  batch.prefix = "body.";
  EXPECT_EQ(Fails({{"prompt", "x"}, {"logprobs", 1}}, false, batch).second,
            "body.logprobs cannot be given here: the records do not carry log-probabilities");
}

}  // namespace
}  // namespace wc

namespace wc {
namespace {

// Every request field of a run option refuses what its one declaration (serving/run_options.h)
// refuses, with the declaration's words: the HTTP API is not another copy of the bounds.
TEST(OpenAIBody, RunOptionFieldsAreTheDeclarations) {
  using namespace run_option;
  struct Case {
    const RunOptionSpec& spec;
    json bad;
  };
  for (const Case& c :
       {Case{kTemperature, -0.5}, Case{kTopP, 0}, Case{kTopP, 1.5}, Case{kTopK, 2.5},
        Case{kTopK, -2}, Case{kMaxNewTokensOption, -1}, Case{kBeams, 17}, Case{kSeed, -3}}) {
    json body = {{"prompt", "x"}, {c.spec.field, c.bad}};
    const auto [param, message] = Fails(body, false, Http());
    EXPECT_EQ(param, c.spec.field);
    EXPECT_EQ(message, c.spec.Refusal(c.spec.field, ShortJson(c.bad)));
  }
  // What each holds is taken (top_k -1 is "no limit", as llama-server and vLLM read it).
  const OpenAIBody b = ParseOpenAIBody(
      {{"prompt", "x"}, {"top_k", -1}, {"top_p", 1}, {"temperature", 0}, {"max_tokens", 0}}, false,
      Http());
  EXPECT_EQ(b.top_k, 0);
  EXPECT_EQ(b.top_p, 1.0f);
  EXPECT_EQ(b.max_tokens, 0);
}

}  // namespace
}  // namespace wc

namespace wc {
namespace {

// ignore_eos (llama-server's and vLLM's extension): the reply runs to max_tokens, EOS or not.
TEST(OpenAIBody, IgnoreEosLetsTheReplyRunToMaxTokens) {
  const OpenAIBody b = ParseOpenAIBody(
      {{"prompt", json::array({5, 6, 7})}, {"max_tokens", 4}, {"ignore_eos", true}}, false, Http());
  EXPECT_TRUE(b.ignore_eos);
  EXPECT_FALSE(ParseOpenAIBody({{"prompt", "x"}}, false, Http()).ignore_eos);
  EXPECT_FALSE(
      ParseOpenAIBody({{"prompt", "x"}, {"ignore_eos", nullptr}}, false, Http()).ignore_eos);
  const auto [param, message] = Fails({{"prompt", "x"}, {"ignore_eos", 1}}, false, Http());
  EXPECT_EQ(param, "ignore_eos");
  EXPECT_EQ(message, "ignore_eos must be true or false, got 1");

  RequestFraming framing;
  framing.ctx = 64;
  framing.vocab_size = 100;
  EXPECT_FALSE(BuildOpenAIRequest(b, RequestDefaults{}, framing, RequestNaming{}).stop_at_eos);
  OpenAIBody plain = b;
  plain.ignore_eos = false;
  EXPECT_TRUE(BuildOpenAIRequest(plain, RequestDefaults{}, framing, RequestNaming{}).stop_at_eos);
}

}  // namespace
}  // namespace wc
