// How a conversation is framed into tokens: from --chat-format FILE or DIR/chat_format.json beside
// the model (so the training recipe, tools/python/train, and the runtime cannot drift apart), else
// from the checkpoint's own chat template (model/chat/chat_template.h) when wormchat knows it:
//   [bos if add_bos] then per turn:
//   Encode([turn_separator after a reply] + user_prefix + message + user_suffix + assistant_prefix)
//   + Encode(reply) + [eos if end_of_turn is eos]
// (each Encode one tokenizer call, special tokens matched), and a system message as
//   Encode(system_prefix + message + system_suffix).
// With a chat template, a prompt or a whole conversation handed at once (generate, batch) is the
// tokenizer's encoding of the template's rendering; a chat fed turn by turn spells the same text.
// Generation stops at EOS or any `stop` string.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/chat/chat_template.h"

namespace wc {

class Tokenizer;

struct ChatFormat {
  bool add_bos = false;
  std::string user_prefix = "User: ";
  std::string user_suffix = "\n";
  std::string assistant_prefix = "Assistant:";
  std::string system_prefix = "System: ";
  std::string system_suffix = "\n";
  bool eos_ends_turn = true;  // "end_of_turn": "eos"
  std::vector<std::string> stop = {"\nUser:"};
  // Text between a reply's end (its EOS when eos_ends_turn) and the next user turn: "\n" for
  // Falcon3, ChatML and Zephyr, whose templates write one after each assistant turn.
  std::string turn_separator;
  // Messages' surrounding whitespace is trimmed as Python's str.strip() does (Llama-3's template:
  // `message['content'] | trim`; Falcon-instruct's `.strip()`).
  bool trim_messages = false;
  // User messages have each "\n\n" made "\n" (Falcon-instruct's template).
  bool collapse_blank_lines = false;
  // The checkpoint's template this format was made from: prompts and whole conversations are its
  // rendering, encoded once.
  std::optional<ChatTemplate> chat_template;
  // Set when the checkpoint's chat template is not one wormchat knows: every framing throws
  // wc::Error with this line (it names --chat-format). Unframed uses (--raw) are unaffected.
  std::string refusal;

  // A format that frames nothing: no BOS, no prefixes or suffixes, no EOS between turns, no stop
  // strings - a conversation is its messages' and replies' tokens back to back (--ids).
  static ChatFormat Unframed();
  // Reads DIR/chat_format.json; nullopt if absent. Throws wc::Error naming the file and key if bad.
  static std::optional<ChatFormat> Load(const std::string& model_dir);
  // The format a model frames with: `chat_format_file` (--chat-format) if given, else
  // DIR/chat_format.json, else the checkpoint's chat template when wormchat knows it (one it does
  // not know gives a format whose every framing throws the one-line refusal), else nullopt.
  static std::optional<ChatFormat> ForModel(const std::string& model_dir,
                                            const std::string& chat_format_file);
  // The file's text, read from `path` (named in messages). Keys left out keep the defaults above.
  // Throws wc::Error "PATH: key 'KEY' ..." for invalid JSON or a key of the wrong type or value.
  static ChatFormat Parse(std::string_view text, const std::string& path);

  // Tokens that open a user turn and cue the assistant's reply; `after_reply`: the turn follows a
  // reply (turn_separator goes first). Throws the refusal, if any.
  std::vector<int> EncodeUserTurn(const Tokenizer& tok, const std::string& message,
                                  bool after_reply = false) const;
  // The tokens of a system message. Throws the refusal, if any.
  std::vector<int> EncodeSystem(const Tokenizer& tok, const std::string& message) const;
  // Throws wc::Error(refusal) when the format cannot frame.
  void CheckUsable() const;
};

}  // namespace wc

namespace wc {

// `ids` opened with the tokenizer's BOS when the model's runtime adds one to every prompt
// (Tokenizer::adds_bos: a GGUF vocabulary's add_bos_token, as llama.cpp honours it) and they do
// not start with it already; else `ids`.
std::vector<int> OpenWithModelBos(const Tokenizer& tok, std::vector<int> ids);

// The token ids `generate` and `logits --prompt` feed for a prompt: [bos if the chat format adds
// one] + the prompt framed as one user turn (or, with `raw` or no chat_format.json, as it is);
// then OpenWithModelBos.
std::vector<int> EncodePrompt(const Tokenizer& tok, const std::optional<ChatFormat>& format,
                              const std::string& text, bool raw, int bos_token_id);

}  // namespace wc

namespace wc {

// The ids a conversation feeds for its next user message `text`: on the first turn [bos if the
// format adds one] + the framed user turn; on later turns [eos if the format ends turns with it] +
// the framed user turn. With `chat` false (no framing) the text is encoded as it is (bos still
// opens the first turn, as EncodePrompt does for --raw).
std::vector<int> EncodeTurn(const Tokenizer& tok, const std::optional<ChatFormat>& format,
                            const std::string& text, bool chat, bool first_turn, int bos_token_id,
                            int eos_token_id);

}  // namespace wc

namespace wc {

// One message of a conversation handed over whole (an OpenAI chat message).
struct ChatMessage {
  enum class Role { kSystem, kUser, kAssistant };
  Role role = Role::kUser;
  std::string content;
};

// The ids of a whole conversation, framed with `format`. With a chat template: the encoding of
// its rendering with the generation prompt. Else [bos if add_bos], then per message
//   system     EncodeSystem(content)
//   user       EncodeUserTurn(content, after an assistant message), which cues the reply
//   assistant  Encode(content) + [eos if eos_ends_turn]
// A single user message gives exactly EncodePrompt(tok, format, content, /*raw=*/false, bos).
// The ids are then OpenWithModelBos's.
// Without a chat format only a single user message can be framed (as EncodePrompt does: as it is);
// anything else throws wc::Error.
std::vector<int> EncodeMessages(const Tokenizer& tok, const std::optional<ChatFormat>& format,
                                const std::vector<ChatMessage>& messages, int bos_token_id,
                                int eos_token_id);

}  // namespace wc
