#include "app/serve/openai_response.h"

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
                const char* finish_reason) {
  json c = {{"index", index}};
  if (h.chat) {
    c["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    c["text"] = text;
  }
  c["logprobs"] = nullptr;
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
               const char* finish_reason, bool include_usage) {
  json c = {{"index", index}};
  if (h.chat) {
    json d = json::object();
    if (first) d["role"] = "assistant";
    if (!delta.empty() || (first && finish_reason == nullptr)) d["content"] = delta;
    c["delta"] = std::move(d);
  } else {
    c["text"] = delta;
  }
  c["logprobs"] = nullptr;
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
