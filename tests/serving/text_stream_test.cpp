// Streaming text: UTF-8 assembled across tokens, stop strings across tokens, control bytes dropped.
#include <gtest/gtest.h>

#include "serving/text_stream.h"

namespace wc {
namespace {

// Feeds `pieces` one by one; returns what the sink saw, and whether a stop string hit.
std::pair<std::string, bool> Stream(const std::vector<std::string>& pieces,
                                    std::vector<std::string> stop = {}, bool trim = false) {
  StringSink sink;
  TextStream ts(std::move(stop), sink, trim);
  bool stopped = false;
  for (const auto& p : pieces) {
    if (ts.Add(p)) {
      stopped = true;
      break;
    }
  }
  ts.Finish();
  EXPECT_EQ(sink.text(), ts.emitted());
  return {sink.text(), stopped};
}

TEST(TextStream, AssemblesUtf8SplitAcrossTokens) {
  // "é" = C3 A9 and "🦅" = F0 9F A6 85 arrive one byte per token (byte fallback).
  StringSink sink;
  TextStream ts({}, sink, false);
  ts.Add("caf\xC3");
  EXPECT_EQ(sink.text(), "caf");  // the lead byte is held back
  ts.Add("\xA9 \xF0\x9F");
  EXPECT_EQ(sink.text(), "café ");
  ts.Add("\xA6");
  ts.Add("\x85!");
  ts.Finish();
  EXPECT_EQ(sink.text(), "café 🦅!");
}

TEST(TextStream, IncompleteOrInvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(Stream({"ab\xE2\x82"}).first, "ab\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Stream({"\xFF x"}).first, "\xEF\xBF\xBD x");
  EXPECT_EQ(Stream({"\xC0\xAF"}).first, "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
}

TEST(TextStream, ControlBytesNeverReachTheSink) {
  EXPECT_EQ(Stream({"a\x1b[2Jb", "\x07\r\n\tc\x7f", "\xC2\x9B"}).first, "a[2Jb\n\tc");
}

TEST(TextStream, StopStringSplitAcrossTokensIsNeverShown) {
  auto [text, stopped] = Stream({"The end.", "\n", "Us", "er: next"}, {"\nUser:"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "The end.");
  // A partial match that turns out not to be the stop string is released.
  auto [text2, stopped2] = Stream({"a\n", "Use", "ful"}, {"\nUser:"});
  EXPECT_FALSE(stopped2);
  EXPECT_EQ(text2, "a\nUseful");
}

TEST(TextStream, HoldsBackOnlyWhatCouldStartAStopString) {
  StringSink sink;
  TextStream ts({"\n\n"}, sink, false);
  ts.Add("line\n");
  EXPECT_EQ(sink.text(), "line");
  ts.Add("more");
  EXPECT_EQ(sink.text(), "line\nmore");
  EXPECT_TRUE(ts.Add("\n\nignored"));
  ts.Finish();
  EXPECT_EQ(sink.text(), "line\nmore");
}

TEST(TextStream, TrimsTheReplysLeadingSpace) {
  EXPECT_EQ(Stream({" ", " A", " harbor"}, {}, true).first, "A harbor");
  EXPECT_EQ(Stream({" A", " harbor"}, {}, false).first, " A harbor");
}

}  // namespace
}  // namespace wc
