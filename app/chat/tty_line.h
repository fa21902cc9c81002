// Line input for the chat's line mode (--plain) on a terminal, without the kernel's canonical-mode
// limit: in canonical mode Linux keeps at most 4095 bytes of a line and silently drops the rest,
// so a long pasted message would be cut. Here the terminal is put in non-canonical mode (no echo,
// signals kept: Ctrl-C, Ctrl-Z and Ctrl-\ still work) and the line is edited and echoed by us,
// with no length limit: printable UTF-8 text (wide characters take two columns, combining marks
// join the character before them; one that starts the line shows as U+FFFD), Backspace, Ctrl-U
// (erase the line), Ctrl-W (erase the word before the cursor), Ctrl-D (end of input on an empty
// line), Enter. Escape sequences (arrow and function keys) are swallowed; other control bytes are
// ignored. Tabs are kept in the line and echoed as spaces up to the next multiple of 8 columns.
#pragma once

#include <string>
#include <vector>

namespace wc {

// The editing state of one line, with no I/O: bytes in, echo bytes out. It tracks where each
// character sits on the screen (the prompt's columns first, wrapping at `columns`), so that
// erasing moves the cursor back over wrapped rows and clears from there.
class TtyLine {
 public:
  enum class Event { kMore, kLine, kEof };

  // `prompt` is already on the screen, from column 0; the terminal is `columns` x `rows`.
  TtyLine(std::string prompt, int columns, int rows);

  // Feeds one input byte; appends what the terminal must show to `echo`. kLine: Enter ended the
  // line (text() holds it, without the newline); kEof: Ctrl-D on an empty line.
  Event Feed(unsigned char byte, std::string& echo);
  const std::string& text() const { return text_; }

 private:
  struct Char {
    size_t offset;      // into text_
    int row, col;       // where it starts on the screen (row 0: the prompt's)
    int width;          // columns
    std::string shown;  // what the screen shows (marks included; a tab's spaces)
  };
  // A new character of `width` columns: `bytes` into the line, `shown` onto the screen.
  void Insert(const std::string& bytes, int width, std::string& echo, const std::string& shown);
  void Append(const std::string& bytes, std::string& echo);  // one code point, or invalid bytes
  void EraseTo(size_t n_chars, std::string& echo);           // keeps the first n_chars characters
  void ShowLast(std::string& echo);                          // the last character, again
  void MoveTo(int row, int col, std::string& echo);

  std::string prompt_;
  int columns_, rows_;
  std::string text_;
  std::vector<Char> chars_;
  int prompt_row_ = 0, prompt_col_ = 0;  // where the line starts
  int row_ = 0, col_ = 0;  // the cursor; col_ == columns_: at the margin, the wrap pending
  std::string pending_;    // an incomplete UTF-8 sequence
  int escape_ = 0;         // 0: none; 1: after ESC; 2: in a CSI / SS3 sequence
};

// Prints `prompt` and reads one line from the terminal `fd` with TtyLine (non-canonical mode for
// the call only; the terminal's settings are restored before returning, and by
// RestoreTtyFromSignal if a signal ends the program meanwhile). Returns false at the end of input
// (Ctrl-D on an empty line, or end of file). Throws wc::Error if `fd` is not a terminal.
// `initial`: text the line starts with, as if typed (/edit's message), editable as the rest.
bool ReadTtyLine(int fd, const std::string& prompt, std::string& line,
                 const std::string& initial = {});

// Async-signal-safe: puts back the terminal settings ReadTtyLine changed, if it is reading. For a
// signal handler that ends the program (SIGINT at the prompt).
void RestoreTtyFromSignal();

}  // namespace wc
