// Turns the bytes of generated tokens into text for a sink: holds back an incomplete UTF-8
// character and any tail that could be the start of a stop string, replaces invalid UTF-8 with
// U+FFFD, and never passes control bytes from the model (other than '\n' and '\t').
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace wc {

// Where streamed text goes: stdout, the TUI, a transcript recorder, a batch writer.
class TextSink {
 public:
  virtual ~TextSink() = default;
  virtual void Write(std::string_view text) = 0;
  virtual void Flush() {}
};

// Collects everything written (tests, transcripts).
class StringSink : public TextSink {
 public:
  void Write(std::string_view text) override { text_.append(text); }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

class TextStream {
 public:
  // trim_leading_space: drop whitespace before the first visible character (a reply after
  // "Assistant:" starts with the tokenizer's word-boundary space).
  TextStream(std::vector<std::string> stop, TextSink& sink, bool trim_leading_space);

  // Appends raw bytes. Returns true once a stop string has appeared: the text before it has been
  // emitted and everything from it on is dropped. Of overlapping stop strings the one complete
  // first wins, so how the bytes are split into calls never changes the text.
  bool Add(std::string_view bytes);
  // Emits whatever is held back (an incomplete character becomes U+FFFD).
  void Finish();
  // All text emitted so far.
  const std::string& emitted() const { return emitted_; }

 private:
  void Emit(std::string_view valid_utf8);

  std::vector<std::string> stop_;
  TextSink& sink_;
  bool trim_leading_;
  bool stopped_ = false;
  std::string pending_;  // bytes not yet emitted
  std::string emitted_;
};

// Length of `s` without a final character that is still unfinished (a lead byte whose
// continuation bytes have not all arrived yet).
size_t Utf8CompletePrefix(std::string_view s);
// Replaces invalid sequences with U+FFFD and drops control characters except '\n' and '\t'.
std::string SanitizeUtf8(std::string_view s);

}  // namespace wc
