// The chat in line mode (stdin or stdout not a terminal, or --plain): one message per line, or a
// block of lines between two `"""` lines; the same slash commands as the full-screen chat; replies
// streamed to stdout as they are generated; Ctrl-C cancels a running reply.
#pragma once

#include "app/chat/chat_session.h"

namespace wc {

// Runs until /quit, /bye or the end of stdin. `banner`: print the model line and the help hint
// first (an interactive terminal).
void RunPlainChat(ChatSession& session, bool banner);

}  // namespace wc
