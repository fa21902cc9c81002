// Conversations kept on disk (issue 33): one transcript file per chat (serving/transcript.h, so
// any saved chat replays token for token with `wormchat transcript replay`) under
// $XDG_DATA_HOME/wormchat/chats (~/.local/share/wormchat/chats), named by the chat's start time
// and its title - 2026-11-27_03-41-12_what-is-a-falcon.txt - with the title itself in a
// "# title: ..." comment line (comments are the format's own; replay ignores it). Writes are
// atomic (a temporary file beside it, fsync, rename, fsync of the directory): a failed write
// leaves what was saved before whole. Nothing but chat files ends in ".txt" in the directory.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

namespace wc {

// $XDG_DATA_HOME/wormchat/chats if XDG_DATA_HOME is set (and absolute), else
// $HOME/.local/share/wormchat/chats. Throws wc::Error when neither variable says where.
std::string DefaultChatsDir();

struct SavedChat {
  std::string path;   // the file
  std::string name;   // its file name without ".txt": what --resume NAME and /open take
  std::string title;  // "# title:" (the file name's if there is none)
  std::string model;  // the header's model line
  int turns = 0;
  int64_t mtime_ns = 0;  // last saved
};

// The chats in `dir`, newest first (by last save; ties by name). Files that are not transcripts
// are skipped. A missing directory has none.
std::vector<SavedChat> ListChats(const std::string& dir);

// The file `name` names in `dir`: "" the newest chat; else a chat's name (with or without
// ".txt"), or a prefix only one chat's name has. Throws wc::Error with one line naming --resume /
// the name and what is wrong (none saved, no such chat, several match).
std::string FindChat(const std::string& dir, const std::string& name);

// A chat's title from its first message: the first line, runs of whitespace as one space, cut at
// 48 characters (on a UTF-8 boundary) with "..." after a cut.
std::string ChatTitle(const std::string& first_message);

// The file name of a chat started at `start` (local time) titled `title`: the time, then the
// title's letters and digits lowercased, runs of anything else as one '-', at most 40 bytes.
std::string ChatFileName(std::time_t start, const std::string& title);

// The "# title: " line's text in a chat file's `text`, or "".
std::string ReadChatTitle(const std::string& text);

// `transcript_text` (FormatTranscript's) with a "# title: TITLE" line after its first line.
std::string WithChatTitle(const std::string& transcript_text, const std::string& title);

// Writes `text` to `path` atomically (temporary file, fsync, rename, directory fsync), creating
// the directory and its parents. Returns "" on success, else why not (one line, e.g. "No space
// left on device"); the file is then as it was.
std::string WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace wc
