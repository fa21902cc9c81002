#include "util/parse.h"

#include <cerrno>
#include <cstdlib>

namespace wc {

std::optional<long long> ParseWholeInteger(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

}  // namespace wc
