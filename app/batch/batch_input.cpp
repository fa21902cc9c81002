#include "app/batch/batch_input.h"

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
  return ShortJson(v);
}

// obj[key], or null when it is absent or JSON null (OpenAI clients send null for "not set").
const json* Field(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string ReadString(const json& obj, const char* key, const std::string& name) {
  const json* v = Field(obj, key);
  if (v == nullptr) throw Error(Cat(name, " is missing"));
  if (!v->is_string()) throw Error(Cat(name, " must be a string, got ", Got(*v)));
  return v->get<std::string>();
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
  OpenAIBodyLimits limits;
  limits.prefix = "body.";
  static_cast<OpenAIBody&>(b) = ParseOpenAIBody(*body, b.chat, limits);
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
