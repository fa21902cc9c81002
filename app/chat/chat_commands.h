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
    kSet,  // /set NAME VALUE: temperature, top-k, top-p, seed, max-tokens, render, speculate (value
           // in `path`: off or lookup), speculate-k or lookup-ngram
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
    kExport,  // /export FILE (path), /export! FILE (value 1: overwrite): .md or .json by extension
    kCopy,    // /copy: the last reply (name ""); /copy code [N]: its Nth code block (name "code",
              // value N >= 1, 1 when not given; a reply with fewer blocks is the front end's)
    kOpen,    // /open N: continue chat N of the /chats list (value N >= 1)
    kFind,    // /find TEXT: search the chat for TEXT (in `text`)
  };
  Kind kind = Kind::kNone;
  std::string name;  // kSet: the setting; kCopy: "" or "code"
  // kSet: its value (checked for range); kBeams: W; kRetry: 1 for "same"; kExport: 1 for "!";
  // kCopy: N; kOpen: N.
  double value = 0;
  std::string path;  // kSave, kLoad, kExport: the file name as typed; kTitle: the title
  std::string text;  // kHint: the hint; kFind: the text to find
};

// Parses one line of input. A line starting with '/' is a command (leading spaces allowed);
// "//text" sends "/text" to the model.
ChatCommand ParseChatCommand(const std::string& line, std::string* message);

// Completions of a partial command line for Tab, each a whole line to put in the input line:
//  - command names after "/" (those that take an argument with a space after them) and setting
//    names after "/set ": every one that starts with what is typed;
//  - file names after "/export ", "/export! ", "/save " and "/load " (FileNameCandidates in
//    app/chat/typed_path.h: relative to the current directory, "~/" kept as typed, directories
//    ending in '/', dot files only after a '.'), readline's way: one line when one name matches,
//    or when the names that match share more than is typed (their CommonPrefix: Tab again then
//    lists them); else every matching line, sorted, for the front end to list.
// Empty when nothing completes. So: one line - put it in the input line; several - show them.
std::vector<std::string> CompleteChatCommand(const std::string& prefix);

// The help: one line per command, then the keys of the full-screen chat.
const char* ChatHelpText();

}  // namespace wc
