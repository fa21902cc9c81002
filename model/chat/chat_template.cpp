#include "model/chat/chat_template.h"

#include <nlohmann/json.hpp>

#include "model/chat/chat_format.h"
#include "model/generation_defaults.h"
#include "model/gguf/gguf_config.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

using Role = ChatMessage::Role;

const char* RoleName(Role r) {
  switch (r) {
    case Role::kSystem:
      return "system";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
  }
  return "user";
}

// Python's str.strip() (Jinja2's `trim` filter and `.strip()` are both it): removes the code
// points str.isspace() accepts from both ends of UTF-8 text.
bool PythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// The code point starting at s[i] and its length in bytes; invalid UTF-8 is one byte that is not a
// space. Not unicode::Next: that one needs valid UTF-8, and a typed chat message need not be.
char32_t CodePointAt(const std::string& s, size_t i, size_t* len) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    *len = 1;
    return 0xFFFD;
  }
  char32_t c = n == 1 ? b : b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto cont = static_cast<unsigned char>(s[i + k]);
    if ((cont >> 6) != 2) {
      *len = 1;
      return 0xFFFD;
    }
    c = (c << 6) | (cont & 0x3F);
  }
  *len = n;
  return c;
}

}  // namespace

std::string PythonStrip(const std::string& s) {
  size_t b = 0, len = 0;
  while (b < s.size() && PythonSpace(CodePointAt(s, b, &len))) b += len;
  // The end: walk the code points after b, remembering where the last non-space one ends.
  size_t e = b;
  for (size_t i = b; i < s.size(); i += len)
    if (!PythonSpace(CodePointAt(s, i, &len))) e = i + len;
  return s.substr(b, e - b);
}

std::string CollapseBlankLines(const std::string& s) {
  std::string out;
  size_t at = 0;
  for (size_t f; (f = s.find("\n\n", at)) != std::string::npos; at = f + 2)
    out.append(s, at, f - at).append("\n");
  return out.append(s, at, std::string::npos);
}

namespace {

// Each renderer below follows its template's text (known_chat_templates.cpp) statement by
// statement; the comment above each gives the template's loop body.

// Falcon3 (the branch without tools):
//   system '<|system|>\n' + content + '\n'; user '<|user|>\n' + content + '\n';
//   assistant '<|assistant|>\n' + content + eos_token (+ '\n' unless it is the last message);
//   after the last message, '<|assistant|>\n' if add_generation_prompt.
std::string RenderFalcon3(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                          bool gen) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool last = i + 1 == messages.size();
    switch (m.role) {
      case Role::kSystem:
        out += "<|system|>\n" + m.content + "\n";
        break;
      case Role::kUser:
        out += "<|user|>\n" + m.content + "\n";
        break;
      case Role::kAssistant:
        out += "<|assistant|>\n" + m.content + t.eos_token + (last ? "" : "\n");
        break;
    }
    if (last && gen) out += "<|assistant|>\n";
  }
  return out;
}

// Falcon-instruct (tiiuae/falcon-7b-instruct): a first system message is taken out and written,
// stripped, before the first turn; the rest must alternate user, assistant, ... (else
// raise_exception); each is '\n\nUser: ' or '\n\nAssistant: ' + content.strip() with "\r\n" and
// then "\n\n" replaced by "\n" (Jinja2 reads the template's "\r\n" literal as "\n": the first
// replace changes nothing); '\n\nAssistant:' if add_generation_prompt.
std::string RenderFalconInstruct(const std::vector<ChatMessage>& messages, bool gen) {
  const bool has_system = !messages.empty() && messages[0].role == Role::kSystem;
  const std::string system = has_system ? messages[0].content : "";
  std::string out;
  for (size_t i = has_system ? 1 : 0, k = 0; i < messages.size(); ++i, ++k) {
    const ChatMessage& m = messages[i];
    if ((m.role == Role::kUser) != (k % 2 == 0))
      throw Error(
          "chat template (Falcon-instruct): Conversation roles must alternate "
          "user/assistant/user/assistant/...");
    if (k == 0) out += PythonStrip(system);
    const std::string body = CollapseBlankLines(PythonStrip(m.content));
    if (m.role == Role::kUser) out += "\n\nUser: " + body;
    if (m.role == Role::kAssistant) out += "\n\nAssistant: " + body;
  }
  if (gen) out += "\n\nAssistant:";
  return out;
}

// ChatML: '<|im_start|>' + role + '\n' + content + '<|im_end|>' + '\n';
// '<|im_start|>assistant\n' if add_generation_prompt.
std::string RenderChatMl(const std::vector<ChatMessage>& messages, bool gen) {
  std::string out;
  for (const ChatMessage& m : messages)
    out += std::string("<|im_start|>") + RoleName(m.role) + "\n" + m.content + "<|im_end|>\n";
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

// Llama-3: bos_token before the first message; '<|start_header_id|>' + role +
// '<|end_header_id|>\n\n' + content | trim + '<|eot_id|>';
// '<|start_header_id|>assistant<|end_header_id|>\n\n' if add_generation_prompt.
std::string RenderLlama3(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                         bool gen) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) out += t.bos_token;
    out += std::string("<|start_header_id|>") + RoleName(messages[i].role) +
           "<|end_header_id|>\n\n" + PythonStrip(messages[i].content) + "<|eot_id|>";
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Zephyr: '<|user|>\n' / '<|system|>\n' / '<|assistant|>\n' + content + eos_token, then the
// template's own newline; after the last message '<|assistant|>' and a newline if
// add_generation_prompt.
std::string RenderZephyr(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                         bool gen) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    out += std::string("<|") + RoleName(messages[i].role) + "|>\n" + messages[i].content +
           t.eos_token + "\n";
    if (i + 1 == messages.size() && gen) out += "<|assistant|>\n";
  }
  return out;
}

}  // namespace

const char* ChatTemplate::name() const {
  switch (kind) {
    case ChatTemplateKind::kFalcon3:
      return "Falcon3";
    case ChatTemplateKind::kFalconInstruct:
      return "Falcon-instruct";
    case ChatTemplateKind::kChatMl:
      return "ChatML";
    case ChatTemplateKind::kLlama3:
      return "Llama-3";
    case ChatTemplateKind::kZephyr:
      return "Zephyr";
  }
  return "?";
}

std::string ChatTemplate::Render(const std::vector<ChatMessage>& messages, bool gen) const {
  switch (kind) {
    case ChatTemplateKind::kFalcon3:
      return RenderFalcon3(*this, messages, gen);
    case ChatTemplateKind::kFalconInstruct:
      return RenderFalconInstruct(messages, gen);
    case ChatTemplateKind::kChatMl:
      return RenderChatMl(messages, gen);
    case ChatTemplateKind::kLlama3:
      return RenderLlama3(*this, messages, gen);
    case ChatTemplateKind::kZephyr:
      return RenderZephyr(*this, messages, gen);
  }
  return std::string();
}

ChatFormat ChatTemplate::Format() const {
  ChatFormat f = ChatFormat::Unframed();
  f.chat_template = *this;
  switch (kind) {
    case ChatTemplateKind::kFalcon3:
      f.system_prefix = "<|system|>\n";
      f.system_suffix = "\n";
      f.user_prefix = "<|user|>\n";
      f.user_suffix = "\n";
      f.assistant_prefix = "<|assistant|>\n";
      f.eos_ends_turn = true;
      f.turn_separator = "\n";
      f.stop = {"<|user|>"};
      break;
    case ChatTemplateKind::kFalconInstruct:
      // "[system]\n\nUser: U\n\nAssistant:" cues a reply the model begins with its own space;
      // the template writes no EOS after a reply, and the next turn opens with its blank line.
      f.user_prefix = "\n\nUser: ";
      f.assistant_prefix = "\n\nAssistant:";
      f.eos_ends_turn = false;
      f.trim_messages = true;
      f.collapse_blank_lines = true;
      f.stop = {"\nUser:"};
      break;
    case ChatTemplateKind::kChatMl:
      f.system_prefix = "<|im_start|>system\n";
      f.system_suffix = "<|im_end|>\n";
      f.user_prefix = "<|im_start|>user\n";
      f.user_suffix = "<|im_end|>\n";
      f.assistant_prefix = "<|im_start|>assistant\n";
      f.eos_ends_turn = true;  // the reply's end is <|im_end|>: the model's EOS
      f.turn_separator = "\n";
      f.stop = {"<|im_start|>"};
      break;
    case ChatTemplateKind::kLlama3:
      f.add_bos = true;
      f.system_prefix = "<|start_header_id|>system<|end_header_id|>\n\n";
      f.system_suffix = "<|eot_id|>";
      f.user_prefix = "<|start_header_id|>user<|end_header_id|>\n\n";
      f.user_suffix = "<|eot_id|>";
      f.assistant_prefix = "<|start_header_id|>assistant<|end_header_id|>\n\n";
      f.eos_ends_turn = true;  // <|eot_id|>
      f.trim_messages = true;
      break;
    case ChatTemplateKind::kZephyr:
      f.system_prefix = "<|system|>\n";
      f.system_suffix = eos_token + "\n";
      f.user_prefix = "<|user|>\n";
      f.user_suffix = eos_token + "\n";
      f.assistant_prefix = "<|assistant|>\n";
      f.eos_ends_turn = true;
      f.turn_separator = "\n";
      f.stop = {"<|user|>"};
      break;
  }
  return f;
}

std::optional<ChatTemplateKind> RecognizeChatTemplate(std::string_view text) {
  auto strip = [](std::string_view s) {
    const char* ws = " \t\n\r";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return std::string_view();
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
  };
  const std::string_view want = strip(text);
  for (const KnownChatTemplateText& k : KnownChatTemplateTexts())
    if (strip(k.text) == want) return k.kind;
  return std::nullopt;
}

std::optional<ChatTemplate> ParseChatTemplate(std::string_view file_text, const std::string& path,
                                              std::string* unknown) {
  const nlohmann::json j = ParseJson(file_text, path);
  if (!j.is_object()) throw Error(Cat(path, ": expected a JSON object"));
  const auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return std::nullopt;
  std::string text;
  if (it->is_array()) {  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
    bool found = false;
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string what = Cat(path, ": key 'chat_template'[", i, "]");
      const nlohmann::json& e = (*it)[i];
      if (!e.is_object()) throw Error(Cat(what, " must be an object with 'name' and 'template'"));
      if (JsonGet<std::string>(e, "name", what) == "default") {
        text = JsonGet<std::string>(e, "template", what);
        found = true;
      }
    }
    if (!found) throw Error(Cat(path, ": key 'chat_template' has no template named \"default\""));
  } else {
    text = JsonAs<std::string>(*it, Cat(path, ": key 'chat_template'"));
  }
  const std::optional<ChatTemplateKind> kind = RecognizeChatTemplate(text);
  if (!kind) {
    *unknown = Cat(path,
                   ": its chat_template is not one wormchat knows (Falcon3, Falcon-instruct, "
                   "ChatML, Llama-3, Zephyr); frame turns with --chat-format FILE (a "
                   "chat_format.json: docs/models.md), or give prompts unframed with --raw");
    return std::nullopt;
  }
  ChatTemplate t;
  t.kind = *kind;
  t.bos_token = TokenKey(j, "bos_token", path).value_or("");
  t.eos_token = TokenKey(j, "eos_token", path).value_or("");
  if (t.kind != ChatTemplateKind::kFalconInstruct && t.kind != ChatTemplateKind::kChatMl &&
      t.eos_token.empty())
    throw Error(
        Cat(path, ": key 'eos_token' is missing, and the ", t.name(), " chat template writes it"));
  if (t.kind == ChatTemplateKind::kLlama3 && t.bos_token.empty())
    throw Error(Cat(path, ": key 'bos_token' is missing, and the Llama-3 chat template writes it"));
  return t;
}

namespace {

// A GGUF file's tokenizer.chat_template, with its bos and eos tokens' text (the vocabulary's
// entries at tokenizer.ggml.{bos,eos}_token_id), read as tokenizer_config.json's keys are.
std::optional<ChatTemplate> GgufChatTemplate(const std::string& path, std::string* unknown) {
  const std::shared_ptr<const GgufFile> file = OpenGgufFile(path);
  const GgufFile& g = *file;
  if (g.Find("tokenizer.chat_template") == nullptr) return std::nullopt;
  nlohmann::json j = {{"chat_template", g.String("tokenizer.chat_template")}};
  for (const char* id : {"bos", "eos"}) {
    const std::string key = Cat("tokenizer.ggml.", id, "_token_id");
    if (g.Find(key) == nullptr || g.Find("tokenizer.ggml.tokens") == nullptr) continue;
    const std::vector<std::string>& tokens = g.Strings("tokenizer.ggml.tokens");
    const int64_t i = g.Int(key);
    if (i < 0 || i >= static_cast<int64_t>(tokens.size()))
      throw Error(Cat(path, ": key '", key, "' is ", i, ", outside the ", tokens.size(),
                      " tokens of tokenizer.ggml.tokens"));
    j[Cat(id, "_token")] = tokens[static_cast<size_t>(i)];
  }
  return ParseChatTemplate(j.dump(), Cat(path, ": tokenizer.chat_template"), unknown);
}

}  // namespace

std::optional<ChatTemplate> LoadChatTemplate(const std::string& dir, std::string* unknown) {
  if (IsGgufModel(dir)) return GgufChatTemplate(dir, unknown);
  const std::string path = JoinPath(dir, "tokenizer_config.json");
  const std::string problem = FileProblem(path);
  if (problem == "missing") return std::nullopt;
  if (!problem.empty()) throw Error(Cat(path, ": ", problem));
  return ParseChatTemplate(ReadTextFile(path, static_cast<int64_t>(kJsonFileMaxBytes)), path,
                           unknown);
}

}  // namespace wc
