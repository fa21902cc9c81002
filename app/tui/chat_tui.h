// The full-screen chat (ncursesw, on the terminal's alternate screen), laid out in the manner of
// weechat/irssi: a title bar, the conversation's scrollback, a status bar, the input line at the
// bottom, and a side panel (F2 or /mesh) with the emulated Wormhole core grid of the last
// attention step and the KV cache. Replies stream in from the serving loop's thread while the
// input stays live. See app/tui/*.h for the editing, wrapping and bar rules it draws with.
#pragma once

#include "app/chat/chat_session.h"

namespace wc {

// How the full-screen chat shows and takes things (the chat command's flags).
struct ChatTuiOptions {
  bool markdown = true;  // --render markdown (false: plain); /set render changes it
  bool mouse = true;     // the wheel scrolls (false: --no-mouse, the terminal keeps the mouse)
};

// Runs until /quit, /bye, Ctrl-D on an empty line, Ctrl-C twice at an empty idle prompt, SIGTERM
// or SIGHUP. The terminal is restored on every way out, exceptions included (they propagate after
// it is). Needs a terminal on stdin and stdout.
void RunChatTui(ChatSession& session, const ChatTuiOptions& options);

}  // namespace wc
