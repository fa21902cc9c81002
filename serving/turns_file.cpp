#include "serving/turns_file.h"

#include <sstream>

#include "util/error.h"

namespace wc {

std::vector<TurnsFileStep> ParseTurnsFile(const std::string& text, const std::string& path) {
  std::vector<TurnsFileStep> steps;
  std::istringstream in(text);
  std::string line;
  int line_no = 0, block_start = 0;
  bool in_block = false;
  std::string block;
  int messages = 0;
  auto fail = [&path](int at, const std::string& what) {
    throw Error(Cat(path, ":", at, ": ", what));
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "\"\"\"") {
      if (in_block) {
        if (block.find_first_not_of(" \t\n") == std::string::npos)
          fail(block_start, "the \"\"\" block is empty");
        steps.push_back({TurnsFileStep::Kind::kMessage, block, "", block_start});
        ++messages;
        block.clear();
      } else {
        block_start = line_no;
      }
      in_block = !in_block;
      continue;
    }
    if (in_block) {
      block += (block.empty() && line_no == block_start + 1 ? "" : "\n") + line;
      continue;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line == "/reset") {
      steps.push_back({TurnsFileStep::Kind::kReset, "", "", line_no});
    } else if (line.rfind("/set", 0) == 0 && (line.size() == 4 || line[4] == ' ')) {
      const std::string rest = line.size() > 5 ? line.substr(5) : "";
      const size_t space = rest.find(' ');
      if (rest.empty() || space == std::string::npos || space + 1 == rest.size())
        fail(line_no, "expected '/set KEY VALUE', e.g. '/set temperature 0.5'");
      steps.push_back(
          {TurnsFileStep::Kind::kSet, rest.substr(0, space), rest.substr(space + 1), line_no});
    } else if (line[0] == '/') {
      fail(line_no, Cat("'", line,
                        "' is not a command (/reset, /set KEY VALUE); put a message that starts "
                        "with '/' in a \"\"\" block"));
    } else {
      steps.push_back({TurnsFileStep::Kind::kMessage, line, "", line_no});
      ++messages;
    }
  }
  if (in_block) fail(block_start, "this \"\"\" block is never closed");
  if (messages == 0) fail(line_no, "no message to send");
  return steps;
}

}  // namespace wc
