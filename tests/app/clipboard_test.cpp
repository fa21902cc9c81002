// The chat's /copy (app/chat/clipboard.h): base64 against RFC 4648's vectors, the exact OSC 52
// bytes, the size cap, and writing the whole sequence to a pipe a reader drains slowly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "app/chat/clipboard.h"

namespace wc {
namespace {

TEST(Clipboard, Base64MatchesRfc4648) {
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("f"), "Zg==");
  EXPECT_EQ(Base64("fo"), "Zm8=");
  EXPECT_EQ(Base64("foo"), "Zm9v");
  EXPECT_EQ(Base64("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
  // Every bit of high bytes and NUL: '+' and '/' from the standard alphabet, no line breaks.
  EXPECT_EQ(Base64(std::string("\xFB\xFF\xBF\x00", 4)), "+/+/AA==");
  EXPECT_EQ(Base64(std::string(100, 'a')).find('\n'), std::string::npos);
  EXPECT_EQ(Base64(std::string(100, 'a')).size(), 136u);
}

TEST(Clipboard, TheSequenceIsPlainOsc52) {
  EXPECT_EQ(Osc52Sequence("hi"), "\x1b]52;c;aGk=\x07");
  EXPECT_EQ(Osc52Sequence("caf\xC3\xA9"), "\x1b]52;c;Y2Fmw6k=\x07");
  // Never tmux's DCS passthrough, even inside tmux.
  EXPECT_EQ(Osc52Sequence("x").find("\x1bP"), std::string::npos);
}

TEST(Clipboard, GroupedBytes) {
  EXPECT_EQ(GroupedBytes(0), "0");
  EXPECT_EQ(GroupedBytes(999), "999");
  EXPECT_EQ(GroupedBytes(1000), "1,000");
  EXPECT_EQ(GroupedBytes(1234567), "1,234,567");
}

// Reads `fd` to its end.
std::string Drain(int fd) {
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
    got.append(buf, static_cast<size_t>(n));
    std::this_thread::sleep_for(std::chrono::microseconds(50));  // the writer fills the pipe
  }
  return got;
}

TEST(Clipboard, CopiesTheWholeSequenceThroughAFullPipe) {
  // The cap's worth: its base64 (74,992 bytes) is more than a pipe holds, so writes to the
  // non-blocking pipe are partial and meet EAGAIN.
  std::string text;
  for (size_t i = 0; i < kOsc52MaxTextBytes; ++i) text += static_cast<char>('a' + i % 26);
  EXPECT_LE(Base64(text).size(), 74994u);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::fcntl(fds[1], F_SETFL, O_NONBLOCK), 0);
  std::string got;
  std::thread reader([&] { got = Drain(fds[0]); });
  const std::string line = CopyToTerminal(text, "the last reply", fds[1]);
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  EXPECT_EQ(got, Osc52Sequence(text));
  EXPECT_EQ(line,
            "copied the last reply (56,244 bytes) to the clipboard by OSC 52 (if nothing arrived: "
            "the terminal must allow clipboard writes; in tmux: set -g set-clipboard on)");
}

TEST(Clipboard, TextOverTheCapOrEmptyIsRefusedAndNothingIsWritten) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string over(kOsc52MaxTextBytes + 1, 'x');
  EXPECT_EQ(CopyToTerminal(over, "code block 2", fds[1]),
            "not copied: code block 2 is 56,245 bytes, more than the 56,244 a terminal's "
            "clipboard reliably takes by OSC 52 (/export FILE.md writes it all)");
  EXPECT_EQ(CopyToTerminal("", "the last reply", fds[1]), "not copied: the last reply is empty");
  ::close(fds[1]);
  EXPECT_EQ(Drain(fds[0]), "");
  ::close(fds[0]);
}

TEST(Clipboard, AWriteErrorSaysWhy) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_EQ(CopyToTerminal("hi", "the last reply", fds[1]),
            "not copied: writing to the terminal failed: Bad file descriptor");
}

}  // namespace
}  // namespace wc
