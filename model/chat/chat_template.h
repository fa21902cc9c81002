// A checkpoint's own chat template (tokenizer_config.json's `chat_template`), recognised by its
// text among the templates wormchat knows, and rendered exactly as Hugging Face's
// `apply_chat_template` renders it (Jinja with trim_blocks and lstrip_blocks).
//
// wormchat has no Jinja engine (Debian packages none that runs Hugging Face templates): each known
// template is a published text, byte for byte (known_chat_templates.cpp), and a renderer written
// from it. tests/model/chat_template_test.cpp checks every renderer against `@huggingface/jinja`'s
// rendering of the stored text (tests/fixtures/chat_templates), and that the incremental framing
// a chat feeds turn by turn (ChatFormat's prefixes and suffixes) spells the same text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wc {

struct ChatMessage;
struct ChatFormat;

enum class ChatTemplateKind {
  kFalcon3,         // tiiuae/Falcon3-*-Instruct: <|system|>/<|user|>/<|assistant|> lines
  kFalconInstruct,  // tiiuae/falcon-7b/40b-instruct: "User: ...\nFalcon:"
  kChatMl,          // <|im_start|>role\n...<|im_end|>\n
  kLlama3,          // Meta-Llama-3-Instruct: header ids, contents trimmed, <|eot_id|>
  kZephyr,          // HuggingFaceH4/zephyr: <|user|>\n...</s>\n
};

struct ChatTemplate {
  ChatTemplateKind kind = ChatTemplateKind::kFalcon3;
  std::string bos_token;  // tokenizer_config.json's bos_token / eos_token text ("" if none)
  std::string eos_token;

  // The display name ("Falcon3", "ChatML", ...).
  const char* name() const;
  // The text Hugging Face renders for `messages` (add_generation_prompt as given; no tools).
  std::string Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  // The same framing as prefixes and suffixes, for a chat fed turn by turn: for every
  // conversation of system?, (user, assistant)*, user, the text ChatFormat's pieces spell equals
  // Render(..., true) with each reply followed by its end of turn.
  ChatFormat Format() const;
};

// The known template whose text `text` is (surrounding whitespace aside), or nullopt.
std::optional<ChatTemplateKind> RecognizeChatTemplate(std::string_view text);

// Reads DIR/tokenizer_config.json's `chat_template` (a string, or a list of {name, template}: the
// one named "default"), or a GGUF model's tokenizer.chat_template with the text of its bos and eos
// token ids. nullopt if the file or the key is absent. A template that is not one
// wormchat knows gives a ChatTemplate-less result through `unknown` (set to the one-line reason,
// naming the file and --chat-format); a malformed file or key throws wc::Error naming it.
std::optional<ChatTemplate> LoadChatTemplate(const std::string& model_dir, std::string* unknown);
// The same from the file's text (`path` names it in messages): what LoadChatTemplate and the
// fuzzer run.
std::optional<ChatTemplate> ParseChatTemplate(std::string_view tokenizer_config_text,
                                              const std::string& path, std::string* unknown);

// Python's str.strip() on UTF-8 text (the code points str.isspace() accepts): what Jinja2's
// `trim` filter and `.strip()` do to a message in the templates above.
std::string PythonStrip(const std::string& s);
// Python's s.replace("\n\n", "\n"): every non-overlapping pair of newlines made one, left to right.
std::string CollapseBlankLines(const std::string& s);

// The texts of the templates wormchat knows, with the kind each is (known_chat_templates.cpp).
struct KnownChatTemplateText {
  ChatTemplateKind kind;
  const char* source;  // where it was published
  std::string_view text;
};
const std::vector<KnownChatTemplateText>& KnownChatTemplateTexts();

}  // namespace wc
