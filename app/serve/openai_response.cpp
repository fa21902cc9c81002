#include "app/serve/openai_response.h"

#include "app/serve/completion_run.h"

#include <utility>

namespace wc {

using nlohmann::json;

namespace {

json Head(const ResponseHead& h, bool chunk) {
  return {{"id", h.id},
          {"object",
           h.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", h.created},
          {"model", h.model}};
}

json Reason(const char* finish_reason) {
  return finish_reason ? json(finish_reason) : json(nullptr);
}

}  // namespace

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json ChoiceJson(const ResponseHead& h, int index, const std::string& text,
                const char* finish_reason, const json& logprobs) {
  json c = {{"index", index}};
  if (h.chat) {
    c["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    c["text"] = text;
  }
  c["logprobs"] = logprobs;
  c["finish_reason"] = Reason(finish_reason);
  return c;
}

json CompletionJson(const ResponseHead& h, json choices, const Usage& u) {
  json j = Head(h, /*chunk=*/false);
  j["choices"] = std::move(choices);
  j["usage"] = UsageJson(u);
  return j;
}

json ChunkJson(const ResponseHead& h, int index, const std::string& delta, bool first,
               const char* finish_reason, bool include_usage, const json& logprobs) {
  json c = {{"index", index}};
  if (h.chat) {
    json d = json::object();
    if (first) d["role"] = "assistant";
    if (!delta.empty() || (first && finish_reason == nullptr)) d["content"] = delta;
    c["delta"] = std::move(d);
  } else {
    c["text"] = delta;
  }
  c["logprobs"] = logprobs;
  c["finish_reason"] = Reason(finish_reason);
  json j = Head(h, /*chunk=*/true);
  j["choices"] = json::array({std::move(c)});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

json UsageChunkJson(const ResponseHead& h, const Usage& u) {
  json j = Head(h, /*chunk=*/true);
  j["choices"] = json::array();
  j["usage"] = UsageJson(u);
  return j;
}

namespace {

json ByteValues(const std::string& bytes) {
  json b = json::array();
  for (unsigned char c : bytes) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

json LogprobsJson(bool chat, const std::vector<TokenLogprob>& tokens, int64_t offset) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
      json top = json::array();
      for (const TokenLogprob::Alternative& a : t.top)
        top.push_back({{"token", a.bytes}, {"logprob", a.logprob}, {"bytes", ByteValues(a.bytes)}});
      content.push_back({{"token", t.bytes},
                         {"logprob", t.logprob},
                         {"bytes", ByteValues(t.bytes)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : tokens) {
    toks.push_back(t.bytes);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const TokenLogprob::Alternative& a : t.top) top[a.bytes] = a.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.bytes.size());
  }
  return {{"tokens", std::move(toks)},
          {"token_logprobs", std::move(lps)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

std::string ServerSentEvent(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json ErrorJson(const std::string& message, const std::string& type, const std::string& param,
               const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

}  // namespace wc
