#include "app/openai/openai_body.h"

#include <cfloat>
#include <climits>
#include <utility>

#include "serving/run_options.h"

namespace wc {

using nlohmann::json;

std::string ShortJson(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

namespace {

// Reads one body; every error names its field through `Fail`.
class BodyReader {
 public:
  BodyReader(const json& body, const OpenAIBodyLimits& limits) : body_(body), limits_(limits) {}

  OpenAIBody Read(bool chat) {
    OpenAIBody b;
    b.chat = chat;
    if (chat) {
      b.messages = ReadMessages();
    } else {
      ReadPrompt(b);
    }
    ReadSampling(b);
    ReadStream(b);
    ReadLogprobs(b);
    ReadIgnoreEos(b);
    return b;
  }

 private:
  [[noreturn]] void Fail(const std::string& param, const std::string& rest) const {
    throw OpenAIFieldError(param, limits_.prefix + param + rest);
  }

  // obj[key], or null when it is absent or JSON null.
  static const json* Field(const json& obj, const char* key) {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  static bool IsNonNegativeInt(const json& v) {
    return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
  }

  std::string ReadString(const json& obj, const char* key, const std::string& name) const {
    const json* v = Field(obj, key);
    if (v == nullptr) Fail(name, " is missing");
    if (!v->is_string()) Fail(name, " must be a string, got " + ShortJson(*v));
    return v->get<std::string>();
  }

  // A message's content: a string, or an array of {type: "text", text} parts joined (what OpenAI's
  // clients send for multi-part messages; image and audio parts cannot be run here).
  std::string ReadContent(const json& m, const std::string& name) const {
    const json* v = Field(m, "content");
    if (v == nullptr) Fail(name, " is missing");
    if (v->is_string()) return v->get<std::string>();
    if (!v->is_array())
      Fail(name, " must be a string or an array of text parts, got " + ShortJson(*v));
    std::string text;
    for (size_t i = 0; i < v->size(); ++i) {
      const json& part = (*v)[i];
      const std::string pname = Cat(name, "[", i, "]");
      if (!part.is_object())
        Fail(pname,
             " must be an object {\"type\": \"text\", \"text\": ...}, got " + ShortJson(part));
      const std::string type = ReadString(part, "type", pname + ".type");
      if (type != "text")
        Fail(pname + ".type", " is '" + type + "': only text parts can be run by this model");
      text += ReadString(part, "text", pname + ".text");
    }
    return text;
  }

  std::vector<ChatMessage> ReadMessages() const {
    const json* v = Field(body_, "messages");
    if (v == nullptr)
      Fail("messages", " is missing (a /v1/chat/completions body needs a messages list)");
    if (!v->is_array())
      Fail("messages", " must be an array of {role, content} objects, got " + ShortJson(*v));
    if (v->empty()) Fail("messages", " is empty");
    if (limits_.max_messages > 0 && v->size() > static_cast<size_t>(limits_.max_messages))
      Fail("messages", Cat(" holds ", v->size(), " messages; at most ", limits_.max_messages,
                           " are accepted (--max-messages)"));
    std::vector<ChatMessage> messages;
    for (size_t i = 0; i < v->size(); ++i) {
      const json& m = (*v)[i];
      const std::string name = Cat("messages[", i, "]");
      if (!m.is_object())
        Fail(name, " must be an object with role and content, got " + ShortJson(m));
      const std::string role = ReadString(m, "role", name + ".role");
      ChatMessage msg;
      if (role == "system" || role == "developer") {  // developer: OpenAI's newer name for system
        msg.role = ChatMessage::Role::kSystem;
      } else if (role == "user") {
        msg.role = ChatMessage::Role::kUser;
      } else if (role == "assistant") {
        msg.role = ChatMessage::Role::kAssistant;
      } else {
        Fail(name + ".role", " must be system, user or assistant, got '" + role + "'");
      }
      msg.content = ReadContent(m, name + ".content");
      messages.push_back(std::move(msg));
    }
    const size_t last = messages.size() - 1;
    if (messages[last].role != ChatMessage::Role::kUser)
      Fail(Cat("messages[", last, "].role"),
           " must be user: the last message is the one the model replies to");
    if (messages[last].content.empty()) Fail(Cat("messages[", last, "].content"), " is empty");
    return messages;
  }

  void ReadPrompt(OpenAIBody& b) const {
    const json* prompt = Field(body_, "prompt");
    if (prompt == nullptr)
      Fail("prompt", " is missing (a /v1/completions body needs a prompt string)");
    if (prompt->is_array()) {  // token ids, as the OpenAI API allows
      if (prompt->empty()) Fail("prompt", " is empty");
      std::vector<int> ids;
      for (size_t i = 0; i < prompt->size(); ++i) {
        const json& id = (*prompt)[i];
        if (!IsNonNegativeInt(id) || id.get<uint64_t>() > static_cast<uint64_t>(INT_MAX))
          Fail(Cat("prompt[", i, "]"),
               " must be a token id (a whole number >= 0), got " + ShortJson(id));
        ids.push_back(static_cast<int>(id.get<uint64_t>()));
      }
      b.prompt_ids = std::move(ids);
      return;
    }
    if (!prompt->is_string())
      Fail("prompt", " must be a string or an array of token ids, got " + ShortJson(*prompt));
    b.prompt = prompt->get<std::string>();
    if (b.prompt.empty()) Fail("prompt", " is empty");
  }

  // A field of a run option (serving/run_options.h), named `key` (its spec's field unless given):
  // a JSON number the option holds, else the spec's refusal naming the field.
  double ReadNumber(const json& v, const RunOptionSpec& spec, const char* key = nullptr) const {
    if (key == nullptr) key = spec.field;
    if (!v.is_number() || (spec.kind == RunOptionKind::kCount && !v.is_number_integer()) ||
        !spec.Holds(v.get<double>()))
      Fail(key, " must be " + spec.Accepts() + ", got " + ShortJson(v));
    return v.get<double>();
  }

  void ReadMaxTokens(OpenAIBody& b, const char* key) const {
    const json* v = Field(body_, key);
    if (v == nullptr) return;
    b.max_tokens = static_cast<int>(ReadNumber(*v, run_option::kMaxNewTokensOption, key));
  }

  // The sampling fields a body may set (the others take the front end's values).
  void ReadSampling(OpenAIBody& b) const {
    ReadMaxTokens(b, "max_completion_tokens");
    ReadMaxTokens(b, "max_tokens");  // both given: the older name wins, as llama-server's
    using namespace run_option;
    if (const json* v = Field(body_, kTemperature.field))
      b.temperature = static_cast<float>(ReadNumber(*v, kTemperature));
    if (const json* v = Field(body_, kTopP.field))
      b.top_p = static_cast<float>(ReadNumber(*v, kTopP));
    if (const json* v = Field(body_, kTopK.field)) {
      // -1 is "no limit" too, as llama-server and vLLM take it.
      const bool minus_one =
          v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() == -1;
      b.top_k = minus_one ? 0 : static_cast<int>(ReadNumber(*v, kTopK));
    }
    if (const json* v = Field(body_, kSeed.field)) {
      if (!IsNonNegativeInt(*v))
        Fail(kSeed.field, " must be " + kSeed.Accepts() + ", got " + ShortJson(*v));
      b.seed = v->get<uint64_t>();
    }
    if (const json* v = Field(body_, "stop")) {
      std::vector<std::string> stop;
      if (v->is_string()) {
        if (v->get<std::string>().empty()) Fail("stop", " is an empty string");
        stop.push_back(v->get<std::string>());
      } else if (v->is_array()) {
        for (size_t i = 0; i < v->size(); ++i) {
          const json& s = (*v)[i];
          const std::string name = Cat("stop[", i, "]");
          if (!s.is_string()) Fail(name, " must be a string, got " + ShortJson(s));
          if (s.get<std::string>().empty()) Fail(name, " is empty");
          stop.push_back(s.get<std::string>());
        }
      } else {
        Fail("stop", " must be a string or a list of strings, got " + ShortJson(*v));
      }
      b.stop = std::move(stop);
    }
    if (const json* v = Field(body_, kBeams.field)) {  // 0: sampling, as when absent
      const int w = static_cast<int>(ReadNumber(*v, kBeams));
      if (w > 0) b.num_beams = w;
    }
    if (const json* v = Field(body_, kLengthPenalty.field)) {
      const double penalty = ReadNumber(*v, kLengthPenalty);
      if (!b.num_beams)
        Fail(kLengthPenalty.field, " applies to beam search: set " + limits_.prefix + kBeams.field);
      b.length_penalty = static_cast<float>(penalty);
    }
    if (const json* v = Field(body_, kEarlyStopping.field)) {
      if (!v->is_boolean())
        Fail(kEarlyStopping.field,
             " must be " + kEarlyStopping.Accepts() + ", got " + ShortJson(*v));
      if (!b.num_beams)
        Fail(kEarlyStopping.field, " applies to beam search: set " + limits_.prefix + kBeams.field);
      b.early_stopping = v->get<bool>();
    }
    if (const json* v = Field(body_, "n")) {
      const int most = b.num_beams ? *b.num_beams : limits_.max_sampled_n;
      if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > most)
        Fail("n",
             Cat(" must be an integer in [1, ", most, "]",
                 b.num_beams                  ? Cat(" (at most ", limits_.prefix, "num_beams)")
                 : limits_.max_sampled_n == 1 ? Cat(" (sampling returns one choice; more need ",
                                                    limits_.prefix, "num_beams)")
                                              : std::string(),
                 ", got ", ShortJson(*v)));
      b.n = v->get<int>();
    }
  }

  void ReadStream(OpenAIBody& b) const {
    const json* v = Field(body_, "stream");
    const json* opts = Field(body_, "stream_options");
    if (!limits_.allow_stream) {
      if (v != nullptr && !(v->is_boolean() && !v->get<bool>()))
        Fail("stream", " cannot be set here: results are written when each request ends");
      return;
    }
    if (v != nullptr) {
      if (!v->is_boolean()) Fail("stream", " must be true or false, got " + ShortJson(*v));
      b.stream = v->get<bool>();
    }
    if (opts != nullptr) {
      if (!opts->is_object())
        Fail("stream_options",
             " must be an object such as {\"include_usage\": true}, got " + ShortJson(*opts));
      if (!b.stream) Fail("stream_options", " applies to streamed replies: set stream to true");
      if (const json* u = Field(*opts, "include_usage")) {
        if (!u->is_boolean())
          Fail("stream_options.include_usage", " must be true or false, got " + ShortJson(*u));
        b.include_usage = u->get<bool>();
      }
    }
  }

  void ReadLogprobs(OpenAIBody& b) const {
    const json* v = Field(body_, "logprobs");
    const json* top = Field(body_, "top_logprobs");
    const auto top_in_range = [](const json& x) {
      return x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() <= kMaxTopLogprobs;
    };
    if (b.chat) {
      if (v != nullptr) {
        if (!v->is_boolean()) Fail("logprobs", " must be true or false, got " + ShortJson(*v));
        b.logprobs = v->get<bool>();
      }
      if (top != nullptr) {
        if (!top_in_range(*top))
          Fail("top_logprobs",
               Cat(" must be an integer in [0, ", kMaxTopLogprobs, "], got ", ShortJson(*top)));
        if (!b.logprobs) Fail("top_logprobs", " needs logprobs set to true");
        b.top_logprobs = top->get<int>();
      }
    } else if (v != nullptr) {  // completions: logprobs is the number of alternatives
      if (!top_in_range(*v))
        Fail("logprobs",
             Cat(" must be an integer in [0, ", kMaxTopLogprobs, "], got ", ShortJson(*v)));
      b.logprobs = true;
      b.top_logprobs = v->get<int>();
    }
    if (b.logprobs && !limits_.allow_logprobs)
      Fail("logprobs", " cannot be given here: the records do not carry log-probabilities");
    if (b.logprobs && b.num_beams)
      Fail("logprobs", " cannot be used with num_beams: beam search does not sample");
  }

  // ignore_eos: llama-server's and vLLM's extension, so a benchmark's replies run to max_tokens.
  void ReadIgnoreEos(OpenAIBody& b) const {
    const json* v = Field(body_, "ignore_eos");
    if (v == nullptr) return;
    if (!v->is_boolean()) Fail("ignore_eos", " must be true or false, got " + ShortJson(*v));
    b.ignore_eos = v->get<bool>();
  }

  const json& body_;
  const OpenAIBodyLimits& limits_;
};

}  // namespace

OpenAIBody ParseOpenAIBody(const json& body, bool chat, const OpenAIBodyLimits& limits) {
  return BodyReader(body, limits).Read(chat);
}

}  // namespace wc
