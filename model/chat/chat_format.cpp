#include "model/chat/chat_format.h"

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {

ChatFormat ChatFormat::Unframed() {
  ChatFormat f;
  f.add_bos = false;
  f.user_prefix = f.user_suffix = f.assistant_prefix = "";
  f.system_prefix = f.system_suffix = "";
  f.eos_ends_turn = false;
  f.stop.clear();
  return f;
}

std::optional<ChatFormat> ChatFormat::Load(const std::string& dir) {
  const std::string path = JoinPath(dir, "chat_format.json");
  if (!FileExists(path)) return std::nullopt;
  return Parse(ReadTextFile(path, static_cast<int64_t>(kJsonFileMaxBytes)), path);
}

std::optional<ChatFormat> ChatFormat::ForModel(const std::string& dir,
                                               const std::string& chat_format_file) {
  if (!chat_format_file.empty()) {
    const std::string problem = FileProblem(chat_format_file);
    if (!problem.empty()) throw Error(Cat("--chat-format ", chat_format_file, ": ", problem));
    return Parse(ReadTextFile(chat_format_file, static_cast<int64_t>(kJsonFileMaxBytes)),
                 chat_format_file);
  }
  if (std::optional<ChatFormat> f = Load(dir)) return f;
  std::string unknown;
  if (const std::optional<ChatTemplate> t = LoadChatTemplate(dir, &unknown)) return t->Format();
  if (unknown.empty()) return std::nullopt;
  ChatFormat refused = Unframed();
  refused.refusal = unknown;
  return refused;
}

ChatFormat ChatFormat::Parse(std::string_view text, const std::string& path) {
  const nlohmann::json j = ParseJson(text, path);
  if (!j.is_object()) throw Error(Cat(path, ": expected a JSON object"));
  ChatFormat f;
  auto str = [&](const char* key, std::string* out) {
    if (auto v = JsonFind<std::string>(j, key, path)) *out = std::move(*v);
  };
  str("user_prefix", &f.user_prefix);
  str("user_suffix", &f.user_suffix);
  str("assistant_prefix", &f.assistant_prefix);
  str("system_prefix", &f.system_prefix);
  str("system_suffix", &f.system_suffix);
  f.add_bos = JsonFind<bool>(j, "add_bos", path).value_or(f.add_bos);
  if (auto end = JsonFind<std::string>(j, "end_of_turn", path)) {
    if (*end != "eos" && *end != "none")
      throw Error(Cat(path, ": key 'end_of_turn' must be \"eos\" or \"none\", got \"",
                      Printable(*end, 40), "\""));
    f.eos_ends_turn = *end == "eos";
  }
  str("turn_separator", &f.turn_separator);
  f.trim_messages = JsonFind<bool>(j, "trim_messages", path).value_or(f.trim_messages);
  f.collapse_blank_lines =
      JsonFind<bool>(j, "collapse_blank_lines", path).value_or(f.collapse_blank_lines);
  if (auto stop = JsonFind<std::vector<std::string>>(j, "stop", path)) {
    for (size_t i = 0; i < stop->size(); ++i)
      if ((*stop)[i].empty()) throw Error(Cat(path, ": key 'stop'[", i, "] is empty"));
    f.stop = std::move(*stop);
  }
  return f;
}

void ChatFormat::CheckUsable() const {
  if (!refusal.empty()) throw Error(refusal);
}

std::vector<int> ChatFormat::EncodeUserTurn(const Tokenizer& tok, const std::string& message,
                                            bool after_reply) const {
  CheckUsable();
  std::string body = trim_messages ? PythonStrip(message) : message;
  if (collapse_blank_lines) body = CollapseBlankLines(body);
  return tok.Encode((after_reply ? turn_separator : std::string()) + user_prefix + body +
                    user_suffix + assistant_prefix);
}

std::vector<int> ChatFormat::EncodeSystem(const Tokenizer& tok, const std::string& message) const {
  CheckUsable();
  return tok.Encode(system_prefix + (trim_messages ? PythonStrip(message) : message) +
                    system_suffix);
}

}  // namespace wc

namespace wc {

std::vector<int> OpenWithModelBos(const Tokenizer& tok, std::vector<int> ids) {
  if (tok.adds_bos() && tok.bos_id() >= 0 && (ids.empty() || ids.front() != tok.bos_id()))
    ids.insert(ids.begin(), tok.bos_id());
  return ids;
}

std::vector<int> EncodePrompt(const Tokenizer& tok, const std::optional<ChatFormat>& format,
                              const std::string& text, bool raw, int bos_token_id) {
  if (format && !raw && format->chat_template) {
    format->CheckUsable();
    return OpenWithModelBos(
        tok, tok.Encode(format->chat_template->Render({{ChatMessage::Role::kUser, text}}, true)));
  }
  std::vector<int> ids;
  if (format && format->add_bos) ids.push_back(bos_token_id);
  const std::vector<int> body =
      format && !raw ? format->EncodeUserTurn(tok, text) : tok.Encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return OpenWithModelBos(tok, std::move(ids));
}

}  // namespace wc

namespace wc {

std::vector<int> EncodeTurn(const Tokenizer& tok, const std::optional<ChatFormat>& format,
                            const std::string& text, bool chat, bool first_turn, int bos_token_id,
                            int eos_token_id) {
  if (first_turn) return EncodePrompt(tok, format, text, !chat, bos_token_id);
  std::vector<int> ids;
  const bool framed = format && chat;
  if (framed && format->eos_ends_turn) ids.push_back(eos_token_id);
  const std::vector<int> body =
      framed ? format->EncodeUserTurn(tok, text, /*after_reply=*/true) : tok.Encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

}  // namespace wc

namespace wc {

std::vector<int> EncodeMessages(const Tokenizer& tok, const std::optional<ChatFormat>& format,
                                const std::vector<ChatMessage>& messages, int bos_token_id,
                                int eos_token_id) {
  if (!format) {
    if (messages.size() != 1 || messages[0].role != ChatMessage::Role::kUser)
      throw Error("the model has no chat_format.json, so only a single user message can be framed");
    return OpenWithModelBos(tok, tok.Encode(messages[0].content));
  }
  format->CheckUsable();
  if (format->chat_template)
    return OpenWithModelBos(tok, tok.Encode(format->chat_template->Render(messages, true)));
  std::vector<int> ids;
  if (format->add_bos) ids.push_back(bos_token_id);
  bool after_reply = false;
  for (const ChatMessage& msg : messages) {
    std::vector<int> part;
    switch (msg.role) {
      case ChatMessage::Role::kSystem:
        part = format->EncodeSystem(tok, msg.content);
        break;
      case ChatMessage::Role::kUser:
        part = format->EncodeUserTurn(tok, msg.content, after_reply);
        break;
      case ChatMessage::Role::kAssistant:
        part = tok.Encode(msg.content);
        if (format->eos_ends_turn) part.push_back(eos_token_id);
        break;
    }
    ids.insert(ids.end(), part.begin(), part.end());
    after_reply = msg.role == ChatMessage::Role::kAssistant;
  }
  return OpenWithModelBos(tok, std::move(ids));
}

}  // namespace wc
