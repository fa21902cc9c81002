#include "model/chat_format.h"

#include <nlohmann/json.hpp>

#include "model/tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {

std::optional<ChatFormat> ChatFormat::Load(const std::string& dir) {
  const std::string path = JoinPath(dir, "chat_format.json");
  if (!FileExists(path)) return std::nullopt;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ReadTextFile(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(Cat(path, ": invalid JSON: ", e.what()));
  }
  if (!j.is_object()) throw Error(Cat(path, ": expected a JSON object"));
  ChatFormat f;
  auto str = [&](const char* key, std::string* out) {
    if (!j.contains(key)) return;
    if (!j[key].is_string()) throw Error(Cat(path, ": key '", key, "' must be a string"));
    *out = j[key].get<std::string>();
  };
  str("user_prefix", &f.user_prefix);
  str("user_suffix", &f.user_suffix);
  str("assistant_prefix", &f.assistant_prefix);
  str("system_prefix", &f.system_prefix);
  str("system_suffix", &f.system_suffix);
  if (j.contains("add_bos")) {
    if (!j["add_bos"].is_boolean()) throw Error(Cat(path, ": key 'add_bos' must be true or false"));
    f.add_bos = j["add_bos"].get<bool>();
  }
  if (j.contains("end_of_turn")) {
    if (j["end_of_turn"] != "eos" && j["end_of_turn"] != "none")
      throw Error(Cat(path, ": key 'end_of_turn' must be \"eos\" or \"none\""));
    f.eos_ends_turn = j["end_of_turn"] == "eos";
  }
  if (j.contains("stop")) {
    if (!j["stop"].is_array()) throw Error(Cat(path, ": key 'stop' must be an array of strings"));
    f.stop.clear();
    for (const auto& s : j["stop"]) {
      if (!s.is_string() || s.get<std::string>().empty())
        throw Error(Cat(path, ": key 'stop' must hold non-empty strings"));
      f.stop.push_back(s.get<std::string>());
    }
  }
  return f;
}

std::vector<int> ChatFormat::EncodeUserTurn(const Tokenizer& tok,
                                            const std::string& message) const {
  return tok.Encode(user_prefix + message + user_suffix + assistant_prefix);
}

}  // namespace wc

namespace wc {

std::vector<int> EncodePrompt(const Tokenizer& tok, const std::optional<ChatFormat>& format,
                              const std::string& text, bool raw, int bos_token_id) {
  std::vector<int> ids;
  if (format && format->add_bos) ids.push_back(bos_token_id);
  const std::vector<int> body =
      format && !raw ? format->EncodeUserTurn(tok, text) : tok.Encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
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
  const std::vector<int> body = framed ? format->EncodeUserTurn(tok, text) : tok.Encode(text);
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
    return tok.Encode(messages[0].content);
  }
  std::vector<int> ids;
  if (format->add_bos) ids.push_back(bos_token_id);
  for (const ChatMessage& msg : messages) {
    std::vector<int> part;
    switch (msg.role) {
      case ChatMessage::Role::kSystem:
        part = tok.Encode(format->system_prefix + msg.content + format->system_suffix);
        break;
      case ChatMessage::Role::kUser:
        part = format->EncodeUserTurn(tok, msg.content);
        break;
      case ChatMessage::Role::kAssistant:
        part = tok.Encode(msg.content);
        if (format->eos_ends_turn) part.push_back(eos_token_id);
        break;
    }
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

}  // namespace wc
