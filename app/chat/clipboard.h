// The chat's /copy: text to the terminal's clipboard by OSC 52 - ESC ] 52 ; c ; BASE64 BEL -
// which works over ssh and in tmux with no clipboard tool on the machine. The sequence is always
// the plain one: tmux (set -g set-clipboard on) forwards it to the outer terminal itself, so it is
// never wrapped in tmux's DCS passthrough. The terminal must allow clipboard writes (xterm:
// allowWindowOps / disallowedWindowOps; many terminals ask or have a setting); nothing tells the
// program whether it did.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace wc {

// The most text /copy sends: 56,244 bytes, whose base64 is 74,992 bytes - within the smallest
// OSC 52 payload cap in common use (74,994 bytes of base64, hterm and others; xterm's is larger).
// Longer text is refused, never cut.
constexpr size_t kOsc52MaxTextBytes = 56244;

// RFC 4648 base64 of `bytes`: the standard alphabet, '=' padding, no line breaks.
std::string Base64(std::string_view bytes);

// ESC ] 52 ; c ; Base64(text) BEL: sets the clipboard ("c") to `text` (any bytes; no size check).
std::string Osc52Sequence(std::string_view text);

// "1,234": `n` with a comma between groups of three digits.
std::string GroupedBytes(size_t n);

// Sends `text` to the clipboard by writing Osc52Sequence(text) to `fd` whole (partial writes and
// EINTR continue; a full non-blocking fd is waited on). `what` names it for the line returned,
// e.g. "the last reply". Returns the line the chat shows: "copied WHAT (N bytes) to the clipboard
// by OSC 52 (if nothing arrived: ...)", or "not copied: ..." with the reason - empty text, more
// than kOsc52MaxTextBytes (nothing written), or the OS's reason the write failed (a sequence cut
// short is ended with BEL so that the terminal does not swallow what is drawn next).
std::string CopyToTerminal(std::string_view text, std::string_view what, int fd);

}  // namespace wc
