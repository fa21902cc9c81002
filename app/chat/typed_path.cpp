#include "app/chat/typed_path.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace wc {
namespace fs = std::filesystem;

std::string ExpandHome(const std::string& path) {
  if (path != "~" && path.rfind("~/", 0) != 0) return path;
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return path;
  return std::string(home) + path.substr(1);
}

std::vector<std::string> FileNameCandidates(const std::string& partial) {
  std::vector<std::string> out;
  if (partial == "~") {
    const char* home = std::getenv("HOME");
    if (home != nullptr && *home != '\0') out.push_back("~/");
    return out;
  }
  const size_t slash = partial.rfind('/');
  const std::string typed_dir = slash == std::string::npos ? "" : partial.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? partial : partial.substr(slash + 1);
  const std::string dir = typed_dir.empty() ? "." : ExpandHome(typed_dir);
  const bool hidden = !name.empty() && name[0] == '.';
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (entry.rfind(name, 0) != 0 || (entry[0] == '.' && !hidden)) continue;
    std::error_code dir_ec;
    const bool is_dir = fs::is_directory(it->path(), dir_ec);  // follows symbolic links
    out.push_back(typed_dir + entry + (is_dir ? "/" : ""));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string CommonPrefix(const std::vector<std::string>& options) {
  if (options.empty()) return "";
  size_t n = options[0].size();
  for (const std::string& o : options) {
    size_t i = 0;
    while (i < n && i < o.size() && o[i] == options[0][i]) ++i;
    n = i;
  }
  // Not inside a character: back to its lead byte when the next byte continues it.
  const std::string& first = options[0];
  while (n > 0 && n < first.size() && (static_cast<unsigned char>(first[n]) & 0xC0) == 0x80) --n;
  return first.substr(0, n);
}

}  // namespace wc
