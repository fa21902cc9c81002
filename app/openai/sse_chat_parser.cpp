// SseChatParser (chat_client.h): a streamed chat completion's server-sent events, read as they
// come. No HTTP here, so the fuzzers link it alone (tests/fuzz/sse_chat_parser_fuzz.cpp).
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "app/openai/chat_client.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {

using nlohmann::json;

namespace {

// obj[key] when it is an integer that fits T, else nullopt.
template <typename T>
std::optional<T> IntField(const json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(v);
  }
  if (it->is_number_integer()) {
    const int64_t v = it->get<int64_t>();
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        v > static_cast<int64_t>(std::numeric_limits<T>::max()))
      return std::nullopt;
    return static_cast<T>(v);
  }
  return std::nullopt;
}

template <typename T>
void ReadInt(const json& obj, const char* key, T* out) {
  if (const std::optional<T> v = IntField<T>(obj, key)) *out = *v;
}

void ReadDouble(const json& obj, const char* key, double* out) {
  const auto it = obj.find(key);
  if (it != obj.end() && it->is_number()) {
    const double v = it->get<double>();
    if (std::isfinite(v)) *out = v;
  }
}

void ReadString(const json& obj, const char* key, std::string* out) {
  const auto it = obj.find(key);
  if (it != obj.end() && it->is_string()) *out = it->get<std::string>();
}

// `wormchat serve`'s extension object (app/serve/server_figures.h); a field of another type than
// it sends is left at 0.
ServerFigures FiguresOf(const json& w) {
  ServerFigures f;
  f.present = true;
  ReadInt(w, "kv_blocks_used", &f.kv_blocks_used);
  ReadInt(w, "kv_blocks_total", &f.kv_blocks_total);
  ReadInt(w, "kv_bytes_used", &f.kv_bytes_used);
  ReadInt(w, "kv_bytes_total", &f.kv_bytes_total);
  ReadString(w, "kv_format", &f.kv_format);
  ReadInt(w, "ctx_size", &f.ctx_size);
  ReadInt(w, "rows_busy", &f.rows_busy);
  ReadInt(w, "user_rows", &f.user_rows);
  ReadInt(w, "queue_length", &f.queue_length);
  ReadDouble(w, "mesh_us_per_token", &f.mesh_us_per_token);
  ReadDouble(w, "model_us_per_token", &f.model_us_per_token);
  const auto est = w.find("model_us_estimated");
  if (est != w.end() && est->is_boolean()) f.model_us_estimated = est->get<bool>();
  ReadString(w, "mesh", &f.mesh);
  return f;
}

// An OpenAI error object's message ({"error": {"message": M}} or {"error": M}), else the JSON.
std::string ErrorMessage(const json& error) {
  if (error.is_object()) {
    const auto m = error.find("message");
    if (m != error.end() && m->is_string()) return Printable(m->get<std::string>(), 200);
  }
  if (error.is_string()) return Printable(error.get<std::string>(), 200);
  return JsonSnippet(error, 200);
}

}  // namespace

std::string HttpErrorText(int status, std::string_view body, std::string_view reason) {
  std::string message;
  json j;
  try {
    j = ParseJson(body, "");
  } catch (const Error&) {
  }
  if (j.is_object()) {
    for (const char* key : {"error", "message", "detail"}) {
      const auto it = j.find(key);
      if (it != j.end() && (it->is_string() || (it->is_object() && it->contains("message")))) {
        message = ErrorMessage(*it);
        break;
      }
    }
  }
  if (message.empty()) {
    std::string_view line = body.substr(0, body.find('\n'));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    message = Printable(line, 200);
  }
  if (message.empty()) message = Printable(reason, 80);
  return message.empty() ? Cat("HTTP ", status) : Cat("HTTP ", status, ": ", message);
}

SseChatParser::SseChatParser(std::function<void(std::string_view)> on_text,
                             std::function<void(const ServerFigures&)> on_figures)
    : on_text_(std::move(on_text)), on_figures_(std::move(on_figures)) {}

bool SseChatParser::Feed(std::string_view bytes) {
  while (!done_ && reply_.error.empty() && !bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const size_t take = nl == std::string_view::npos ? bytes.size() : nl;
    if (pending_.size() + take > kMaxLineBytes) {
      Fail("a line longer than 16 MiB");
      break;
    }
    if (nl == std::string_view::npos) {
      pending_.append(bytes);
      break;
    }
    if (pending_.empty()) {
      Line(bytes.substr(0, nl));
    } else {
      pending_.append(bytes.substr(0, nl));
      const std::string line = std::move(pending_);
      pending_.clear();
      Line(line);
    }
    bytes.remove_prefix(nl + 1);
  }
  return !done_ && reply_.error.empty();
}

void SseChatParser::Finish() {
  if (finished_) return;
  finished_ = true;
  if (!done_ && reply_.error.empty() && !pending_.empty()) {
    const std::string line = std::move(pending_);
    pending_.clear();
    Line(line);
  }
  if (!done_ && reply_.error.empty()) Dispatch();
  if (done_ || !reply_.error.empty()) return;
  if (!reply_.finish_reason.empty()) {
    done_ = true;  // a server that sends no [DONE]: the finish_reason ended the reply
    return;
  }
  Fail(reply_.deltas > 0 ? "the stream ended early (no finish_reason, no [DONE])"
                         : "the stream ended early (no text, no [DONE])");
}

void SseChatParser::Line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return Dispatch();
  if (line.front() == ':') return;  // a comment: keep-alives
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (data_.size() + value.size() + 1 > kMaxLineBytes) return Fail("an event longer than 16 MiB");
    data_.append(value);
    data_ += '\n';
  } else if (field == "event") {
    event_ = std::string(value);
  } else if (field == "id" || field == "retry") {
    // Reconnection fields: a chat reply is never resumed.
  } else {
    Fail(Cat("the reply is not server-sent events: '", Printable(line, 80), "'"));
  }
}

void SseChatParser::Dispatch() {
  std::string data = std::move(data_);
  data_.clear();
  const std::string event = std::move(event_);
  event_.clear();
  if (data.empty()) return;  // no data line: no event
  data.pop_back();           // the last line's LF
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  json j;
  try {
    j = ParseJson(data, "");
  } catch (const Error& e) {  // syntax, a number out of range, nesting too deep
    return Fail(Cat("an event that is not JSON (", Printable(e.what(), 120), "): '",
                    Printable(data, 60), "'"));
  }
  if (!j.is_object()) return Fail(Cat("an event that is not a JSON object: ", JsonSnippet(j, 80)));
  const auto error = j.find("error");
  if (error != j.end() && !error->is_null())
    return Fail(Cat("server error: ", ErrorMessage(*error)));
  if (event == "error") return Fail(Cat("server error: ", JsonSnippet(j, 200)));

  const auto choices = j.find("choices");
  if (choices != j.end() && choices->is_array()) {
    for (const json& c : *choices) {
      if (!c.is_object() || IntField<int64_t>(c, "index").value_or(0) != 0) continue;
      const auto delta = c.find("delta");
      if (delta != c.end() && delta->is_object()) {
        const auto content = delta->find("content");
        if (content != delta->end() && content->is_string()) {
          const std::string& text = content->get_ref<const std::string&>();
          if (!text.empty()) {
            reply_.text += text;
            ++reply_.deltas;
            if (on_text_) on_text_(text);
          }
        }
      }
      ReadString(c, "finish_reason", &reply_.finish_reason);
    }
  }
  const auto usage = j.find("usage");
  if (usage != j.end() && usage->is_object()) {
    ReadInt(*usage, "prompt_tokens", &reply_.prompt_tokens);
    ReadInt(*usage, "completion_tokens", &reply_.completion_tokens);
    const auto details = usage->find("prompt_tokens_details");
    if (details != usage->end() && details->is_object())
      ReadInt(*details, "cached_tokens", &reply_.cached_tokens);
  }
  const auto figures = j.find("wormchat");
  if (figures != j.end() && figures->is_object()) {
    reply_.figures = FiguresOf(*figures);
    if (on_figures_) on_figures_(reply_.figures);
  }
}

void SseChatParser::Fail(const std::string& why) {
  if (reply_.error.empty()) reply_.error = why;
}

}  // namespace wc
