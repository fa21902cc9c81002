#include "app/batch/batch_input.h"

#include <cfloat>
#include <climits>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_file.h"

namespace wc {

using nlohmann::json;

BatchFormat ParseBatchFormat(const std::string& name) {
  if (name == "auto") return BatchFormat::kAuto;
  if (name == "jsonl") return BatchFormat::kJsonl;
  if (name == "text") return BatchFormat::kText;
  throw Error(Cat("--format '", name, "' is not supported; choose jsonl or text"));
}

namespace {

bool IsBlank(const std::string& s) {
  return s.find_first_not_of(" \t\r") == std::string::npos;
}

// The input's lines without their '\n' (and a final '\r'), a UTF-8 byte-order mark dropped.
std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

// A JSON value for an error message, shortened.
std::string Got(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// obj[key], or null when it is absent or JSON null (OpenAI clients send null for "not set").
const json* Field(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool IsNonNegativeInt(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

std::string ReadString(const json& obj, const char* key, const std::string& name) {
  const json* v = Field(obj, key);
  if (v == nullptr) throw Error(Cat(name, " is missing"));
  if (!v->is_string()) throw Error(Cat(name, " must be a string, got ", Got(*v)));
  return v->get<std::string>();
}

std::vector<ChatMessage> ReadMessages(const json& body) {
  const json* v = Field(body, "messages");
  if (v == nullptr)
    throw Error("body.messages is missing (a /v1/chat/completions body needs a messages list)");
  if (!v->is_array())
    throw Error(Cat("body.messages must be an array of {role, content} objects, got ", Got(*v)));
  if (v->empty()) throw Error("body.messages is empty");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string name = Cat("body.messages[", i, "]");
    if (!m.is_object())
      throw Error(Cat(name, " must be an object with role and content, got ", Got(m)));
    const std::string role = ReadString(m, "role", name + ".role");
    ChatMessage msg;
    if (role == "system") {
      msg.role = ChatMessage::Role::kSystem;
    } else if (role == "user") {
      msg.role = ChatMessage::Role::kUser;
    } else if (role == "assistant") {
      msg.role = ChatMessage::Role::kAssistant;
    } else {
      throw Error(Cat(name, ".role must be system, user or assistant, got '", role, "'"));
    }
    msg.content = ReadString(m, "content", name + ".content");
    messages.push_back(std::move(msg));
  }
  const size_t last = messages.size() - 1;
  if (messages[last].role != ChatMessage::Role::kUser)
    throw Error(Cat("body.messages[", last,
                    "].role must be user: the last message is the one the model replies to"));
  if (messages[last].content.empty())
    throw Error(Cat("body.messages[", last, "].content is empty"));
  return messages;
}

// The sampling fields a body may set (the others take the command line's values).
void ReadSampling(const json& body, BatchLine& b) {
  if (const json* v = Field(body, "max_tokens")) {
    if (!IsNonNegativeInt(*v))
      throw Error(Cat("body.max_tokens must be an integer >= 0, got ", Got(*v)));
    b.max_tokens = static_cast<int>(std::min<uint64_t>(v->get<uint64_t>(), INT_MAX));
  }
  if (const json* v = Field(body, "temperature")) {
    if (!v->is_number() || !(v->get<double>() >= 0) || !(v->get<double>() <= FLT_MAX))
      throw Error(Cat("body.temperature must be a number >= 0, got ", Got(*v)));
    b.temperature = static_cast<float>(v->get<double>());
  }
  if (const json* v = Field(body, "top_p")) {
    if (!v->is_number() || !(v->get<double>() > 0 && v->get<double>() <= 1))
      throw Error(Cat("body.top_p must be a number in (0, 1], got ", Got(*v)));
    b.top_p = static_cast<float>(v->get<double>());
  }
  if (const json* v = Field(body, "top_k")) {
    if (!v->is_number_integer() || (!v->is_number_unsigned() && v->get<int64_t>() < -1))
      throw Error(Cat("body.top_k must be an integer >= -1 (-1 or 0: no limit), got ", Got(*v)));
    const int64_t k = v->is_number_unsigned()
                          ? static_cast<int64_t>(std::min<uint64_t>(v->get<uint64_t>(), INT_MAX))
                          : std::min<int64_t>(v->get<int64_t>(), INT_MAX);
    b.top_k = k < 0 ? 0 : static_cast<int>(k);
  }
  if (const json* v = Field(body, "seed")) {
    if (!IsNonNegativeInt(*v)) throw Error(Cat("body.seed must be an integer >= 0, got ", Got(*v)));
    b.seed = v->get<uint64_t>();
  }
  if (const json* v = Field(body, "stop")) {
    std::vector<std::string> stop;
    if (v->is_string()) {
      if (v->get<std::string>().empty()) throw Error("body.stop is an empty string");
      stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (size_t i = 0; i < v->size(); ++i) {
        const json& s = (*v)[i];
        if (!s.is_string()) throw Error(Cat("body.stop[", i, "] must be a string, got ", Got(s)));
        if (s.get<std::string>().empty()) throw Error(Cat("body.stop[", i, "] is empty"));
        stop.push_back(s.get<std::string>());
      }
    } else {
      throw Error(Cat("body.stop must be a string or a list of strings, got ", Got(*v)));
    }
    b.stop = std::move(stop);
  }
  if (const json* v = Field(body, "num_beams")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > 16)
      throw Error(Cat("body.num_beams must be an integer in [1, 16], got ", Got(*v)));
    b.num_beams = v->get<int>();
  }
  if (const json* v = Field(body, "length_penalty")) {
    if (!v->is_number() || !(v->get<double>() >= 0) || !(v->get<double>() <= FLT_MAX))
      throw Error(Cat("body.length_penalty must be a finite number >= 0, got ", Got(*v)));
    if (!b.num_beams) throw Error("body.length_penalty applies to beam search: set body.num_beams");
    b.length_penalty = static_cast<float>(v->get<double>());
  }
  if (const json* v = Field(body, "early_stopping")) {
    if (!v->is_boolean())
      throw Error(Cat("body.early_stopping must be true or false, got ", Got(*v)));
    if (!b.num_beams) throw Error("body.early_stopping applies to beam search: set body.num_beams");
    b.early_stopping = v->get<bool>();
  }
  if (const json* v = Field(body, "n")) {
    const int most = b.num_beams ? *b.num_beams : 1;
    if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > most)
      throw Error(Cat("body.n must be an integer in [1, ", most, "]",
                      b.num_beams ? " (at most body.num_beams)"
                                  : " (sampling returns one choice; more need body.num_beams)",
                      ", got ", Got(*v)));
    b.n = v->get<int>();
  }
}

// Parses one JSONL line into `b` (custom_id first, so an error later on still reports it).
// Throws wc::Error without the "line N: " prefix. `seen`: custom_id -> first line.
void ParseJsonLine(const std::string& text, BatchLine& b, std::map<std::string, int>& seen) {
  json j;
  try {
    j = ParseJson(text, "");
  } catch (const JsonError& e) {
    if (e.byte() > 0) throw Error(Cat("not valid JSON (syntax error at byte ", e.byte(), ")"));
    throw Error(Cat("not valid JSON (", e.reason(), ")"));
  }
  if (!j.is_object()) throw Error(Cat("expected a JSON object, got ", Got(j)));
  b.custom_id = ReadString(j, "custom_id", "custom_id");
  const auto [first, inserted] = seen.emplace(*b.custom_id, b.line);
  if (!inserted) throw Error(Cat("custom_id '", *b.custom_id, "' duplicates line ", first->second));
  const std::string method = ReadString(j, "method", "method");
  if (method != "POST") throw Error(Cat("method must be POST, got '", method, "'"));
  const std::string url = ReadString(j, "url", "url");
  if (url == "/v1/chat/completions") {
    b.chat = true;
  } else if (url != "/v1/completions") {
    throw Error(Cat("url must be /v1/completions or /v1/chat/completions, got '", url, "'"));
  }
  const json* body = Field(j, "body");
  if (body == nullptr) throw Error("body is missing");
  if (!body->is_object()) throw Error(Cat("body must be an object, got ", Got(*body)));
  if (b.chat) {
    b.messages = ReadMessages(*body);
  } else {
    const json* prompt = Field(*body, "prompt");
    if (prompt == nullptr)
      throw Error("body.prompt is missing (a /v1/completions body needs a prompt string)");
    if (prompt->is_array()) {  // token ids, as the OpenAI API allows
      if (prompt->empty()) throw Error("body.prompt is empty");
      std::vector<int> ids;
      for (size_t i = 0; i < prompt->size(); ++i) {
        const json& id = (*prompt)[i];
        if (!IsNonNegativeInt(id) || id.get<uint64_t>() > static_cast<uint64_t>(INT_MAX))
          throw Error(
              Cat("body.prompt[", i, "] must be a token id (a whole number >= 0), got ", Got(id)));
        ids.push_back(static_cast<int>(id.get<uint64_t>()));
      }
      b.prompt_ids = std::move(ids);
    } else {
      if (!prompt->is_string())
        throw Error(
            Cat("body.prompt must be a string or an array of token ids, got ", Got(*prompt)));
      b.prompt = prompt->get<std::string>();
      if (b.prompt.empty()) throw Error("body.prompt is empty");
    }
  }
  ReadSampling(*body, b);
}

}  // namespace

BatchFormat DetectBatchFormat(const std::string& text, BatchFormat format) {
  if (format != BatchFormat::kAuto) return format;
  for (const std::string& line : SplitLines(text)) {
    if (IsBlank(line)) continue;
    const size_t first = line.find_first_not_of(" \t");
    return line[first] == '{' ? BatchFormat::kJsonl : BatchFormat::kText;
  }
  return BatchFormat::kText;
}

std::vector<BatchLine> ParseBatchInput(const std::string& text, BatchFormat format) {
  WC_CHECK(format != BatchFormat::kAuto, "detect the format first");
  std::vector<BatchLine> out;
  std::map<std::string, int> seen;
  const std::vector<std::string> lines = SplitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (IsBlank(lines[i])) continue;
    BatchLine b;
    b.line = static_cast<int>(i) + 1;
    if (format == BatchFormat::kText) {
      b.custom_id = std::to_string(b.line);
      b.chat = true;
      b.from_text = true;
      b.prompt = lines[i];
    } else {
      try {
        ParseJsonLine(lines[i], b, seen);
      } catch (const Error& e) {
        b.error = Cat("line ", b.line, ": ", e.what());
      }
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace wc
