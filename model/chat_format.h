// How a conversation is framed into tokens, read from DIR/chat_format.json beside the model, so the
// training recipe (tools/python/train) and the runtime cannot drift apart:
//   [bos if add_bos] then per turn:
//   Encode(user_prefix + message + user_suffix + assistant_prefix) + Encode(reply) + [eos]
// (each Encode one sentencepiece call), and a system message (batch requests) as
//   Encode(system_prefix + message + system_suffix).
// Generation stops at EOS or any `stop` string.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

  // A format that frames nothing: no BOS, no prefixes or suffixes, no EOS between turns, no stop
  // strings - a conversation is its messages' and replies' tokens back to back (--ids).
  static ChatFormat Unframed();
  // Reads DIR/chat_format.json; nullopt if absent. Throws wc::Error naming the file and key if bad.
  static std::optional<ChatFormat> Load(const std::string& model_dir);
  // The file's text, read from `path` (named in messages). Keys left out keep the defaults above.
  // Throws wc::Error "PATH: key 'KEY' ..." for invalid JSON or a key of the wrong type or value.
  static ChatFormat Parse(std::string_view text, const std::string& path);

  // Tokens that open a user turn and cue the assistant's reply.
  std::vector<int> EncodeUserTurn(const Tokenizer& tok, const std::string& message) const;
};

}  // namespace wc

namespace wc {

// The token ids `generate` and `logits --prompt` feed for a prompt: [bos if the chat format adds
// one] + the prompt framed as one user turn (or, with `raw` or no chat_format.json, as it is).
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

// The ids of a whole conversation, framed with `format`: [bos if add_bos], then per message
//   system     Encode(system_prefix + content + system_suffix)
//   user       EncodeUserTurn(content), which cues the assistant's reply
//   assistant  Encode(content) + [eos if eos_ends_turn]
// A single user message gives exactly EncodePrompt(tok, format, content, /*raw=*/false, bos).
// Without a chat format only a single user message can be framed (as EncodePrompt does: as it is);
// anything else throws wc::Error.
std::vector<int> EncodeMessages(const Tokenizer& tok, const std::optional<ChatFormat>& format,
                                const std::vector<ChatMessage>& messages, int bos_token_id,
                                int eos_token_id);

}  // namespace wc
