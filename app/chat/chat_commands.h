// The chat's slash commands, shared by the full-screen chat and line mode: parsing into a
// ChatCommand (never throws: a bad command becomes a one-line hint for the user, and never
// reaches the model), the completions Tab offers, and the help text.
#pragma once

#include <string>
#include <vector>

namespace wc {

struct ChatCommand {
  enum class Kind {
    kNone,  // not a command: a message for the model
    kHint,  // a bad or unknown command: show `text`
    kHelp,
    kReset,
    kSet,    // /set NAME VALUE: name is temperature, top-k, top-p, seed or max-tokens
    kBeams,  // /beams W (0: sample)
    kStats,
    kMesh,
    kSave,    // /save FILE
    kLoad,    // /load FILE
    kQuit,    // /quit, /bye
    kRetry,   // /retry, /retry same: a new reply to the last message (value 1: the same seed)
    kUndo,    // /undo: the last exchange removed
    kEdit,    // /edit: the last exchange removed, its message back in the input line
    kTitle,   // /title TEXT (in `path`)
    kForget,  // /forget: the chat's file deleted, no more saving
    kChats,   // /chats: the saved chats
  };
  Kind kind = Kind::kNone;
  std::string name;  // kSet: the setting
  double value = 0;  // kSet: its value (checked for range); kBeams: W; kRetry: 1 for "same"
  std::string path;  // kSave, kLoad; kTitle: the title
  std::string text;  // kHint
};

// Parses one line of input. A line starting with '/' is a command (leading spaces allowed);
// "//text" sends "/text" to the model.
ChatCommand ParseChatCommand(const std::string& line, std::string* message);

// Completions of a partial command line for Tab: command names (after "/"), setting names (after
// "/set "). Empty when nothing completes.
std::vector<std::string> CompleteChatCommand(const std::string& prefix);

// One line per command.
const char* ChatHelpText();

}  // namespace wc
