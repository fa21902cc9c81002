// An HTTP request body as `wormchat serve` reads it (app/openai/openai_body.h): JSON parsed with
// the depth limit, then the OpenAI fields of a chat and of a completions request. Bad input is a
// wc::Error naming the field (OpenAIFieldError) or the JSON's problem; anything else (a crash,
// another exception, a sanitizer report) is a bug.
#include <cstdint>
#include <string>

#include "app/openai/openai_body.h"
#include "tests/fuzz/fuzz_util.h"
#include "util/json_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json j;
  try {
    j = wc::ParseJson(text, "");
  } catch (const wc::JsonError&) {
    return 0;
  }
  if (!j.is_object()) return 0;
  wc::OpenAIBodyLimits limits;
  limits.max_sampled_n = 8;
  limits.max_messages = 64;
  limits.allow_stream = true;
  limits.allow_logprobs = true;
  for (bool chat : {true, false}) {
    try {
      const wc::OpenAIBody b = wc::ParseOpenAIBody(j, chat, limits);
      wc::fuzz::Require(b.chat == chat, "the route decides chat");
      wc::fuzz::Require(
          !chat || (!b.messages.empty() && b.messages.back().role == wc::ChatMessage::Role::kUser),
          "a chat body ends with a user message");
      wc::fuzz::Require(chat || !b.prompt.empty() || (b.prompt_ids && !b.prompt_ids->empty()),
                        "a completions body has a prompt");
      wc::fuzz::Require(!b.n || (*b.n >= 1 && *b.n <= (b.num_beams ? *b.num_beams : 8)),
                        "n within its limit");
    } catch (const wc::OpenAIFieldError& e) {
      const std::string what = e.what();
      wc::fuzz::Require(!e.param().empty(), "a field error names its field");
      wc::fuzz::Require(what.rfind(e.param(), 0) == 0, "the message starts with the field");
      wc::fuzz::Require(what.find('\n') == std::string::npos, "one-line errors");
    }
  }
  return 0;
}
