// The input of `wormchat transcript record --turns FILE`: the user's side of a conversation.
//
//   What is a falcon?            one message per line
//   """                          a line of three quotes opens a multi-line message ...
//   Two lines,
//   kept as they are.
//   """                          ... and the next such line closes it
//   /reset                       a new conversation (the chat's /reset)
//   /set temperature 0.5         a setting for the turns after it (serving/transcript.h's keys)
//
// Blank lines between messages are skipped; inside a """ block every line is kept. Any other line
// starting with '/' is an error (a message that starts with '/' goes in a """ block).
#pragma once

#include <string>
#include <vector>

namespace wc {

struct TurnsFileStep {
  enum class Kind { kMessage, kReset, kSet };
  Kind kind = Kind::kMessage;
  std::string text;   // kMessage: the message; kSet: the key
  std::string value;  // kSet: the value
  int line = 0;       // 1-based, for messages
};

// Parses `text` read from `path`. Throws wc::Error "PATH:LINE: ..." for an unknown /command, a
// /set without a value, a """ block never closed, or a file without any message.
std::vector<TurnsFileStep> ParseTurnsFile(const std::string& text, const std::string& path);

}  // namespace wc
