#include "app/chat/clipboard.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "util/error.h"

namespace wc {
namespace {

// Writes all of `data` to `fd`, counting the bytes written in `written`. Returns "" when done,
// else the OS's reason.
std::string WriteAll(int fd, std::string_view data, size_t& written) {
  while (!data.empty()) {
    const ssize_t w = ::write(fd, data.data(), data.size());
    if (w >= 0) {
      data.remove_prefix(static_cast<size_t>(w));
      written += static_cast<size_t>(w);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, 5000);
      if (r > 0 || (r < 0 && errno == EINTR)) continue;
      return r == 0 ? "the terminal took nothing for 5 seconds" : std::strerror(errno);
    }
    return std::strerror(errno);
  }
  return "";
}

}  // namespace

std::string Base64(std::string_view bytes) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16 |
                       static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const size_t left = bytes.size() - i;
  if (left > 0) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (left == 2) v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string Osc52Sequence(std::string_view text) {
  return "\x1b]52;c;" + Base64(text) + "\a";
}

std::string GroupedBytes(size_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string CopyToTerminal(std::string_view text, std::string_view what, int fd) {
  if (text.empty()) return Cat("not copied: ", what, " is empty");
  if (text.size() > kOsc52MaxTextBytes)
    return Cat("not copied: ", what, " is ", GroupedBytes(text.size()), " bytes, more than the ",
               GroupedBytes(kOsc52MaxTextBytes),
               " a terminal's clipboard reliably takes by OSC 52 (/export FILE.md writes it all)");
  const std::string seq = Osc52Sequence(text);
  size_t written = 0;
  const std::string why = WriteAll(fd, seq, written);
  if (!why.empty()) {
    size_t ignored = 0;
    if (written > 0) WriteAll(fd, "\a", ignored);  // ends the sequence cut short
    return Cat("not copied: writing to the terminal failed: ", why);
  }
  return Cat("copied ", what, " (", GroupedBytes(text.size()),
             " bytes) to the clipboard by OSC 52 (if nothing arrived: the terminal must allow "
             "clipboard writes; in tmux: set -g set-clipboard on)");
}

}  // namespace wc
