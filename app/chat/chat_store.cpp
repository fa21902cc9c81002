#include "app/chat/chat_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "serving/transcript.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

namespace fs = std::filesystem;

constexpr char kSuffix[] = ".txt";
constexpr char kTitleLine[] = "# title: ";

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string DefaultChatsDir() {
  const char* data = std::getenv("XDG_DATA_HOME");
  if (data != nullptr && data[0] == '/') return std::string(data) + "/wormchat/chats";
  const char* home = std::getenv("HOME");
  if (home == nullptr || home[0] == '\0')
    throw Error("cannot tell where to keep chats: neither XDG_DATA_HOME nor HOME is set");
  return std::string(home) + "/.local/share/wormchat/chats";
}

std::vector<SavedChat> ListChats(const std::string& dir) {
  std::vector<SavedChat> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (!EndsWith(file, kSuffix) || file[0] == '.') continue;
    std::error_code e2;
    if (!entry.is_regular_file(e2)) continue;
    SavedChat c;
    c.path = entry.path().string();
    c.name = file.substr(0, file.size() - std::strlen(kSuffix));
    try {
      const std::string text = ReadTextFile(c.path, int64_t{64} << 20);
      const Transcript t = ParseTranscript(text, c.path);
      c.model = t.model;
      c.turns = static_cast<int>(t.turns.size());
      c.title = ReadChatTitle(text);
    } catch (const Error&) {
      continue;  // not a chat this program wrote
    }
    if (c.title.empty()) c.title = c.name;
    struct stat st {};
    if (::stat(c.path.c_str(), &st) == 0)
      c.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const SavedChat& a, const SavedChat& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns > b.mtime_ns : a.name > b.name;
  });
  return out;
}

std::string FindChat(const std::string& dir, const std::string& name) {
  const std::vector<SavedChat> chats = ListChats(dir);
  if (chats.empty()) throw Error(Cat("--resume: no saved chat in ", dir));
  if (name.empty()) return chats.front().path;
  std::string want = name;
  if (EndsWith(want, kSuffix)) want.resize(want.size() - std::strlen(kSuffix));
  std::vector<const SavedChat*> found;
  for (const SavedChat& c : chats) {
    if (c.name == want) return c.path;
    if (c.name.rfind(want, 0) == 0) found.push_back(&c);
  }
  if (found.empty())
    throw Error(
        Cat("--resume ", name, ": no saved chat of that name in ", dir, " (/chats lists them)"));
  if (found.size() > 1)
    throw Error(Cat("--resume ", name, ": ", found.size(), " chats start so (", found[0]->name,
                    ", ", found[1]->name, found.size() > 2 ? ", ..." : "", "); give more of it"));
  return found.front()->path;
}

std::string ChatTitle(const std::string& first_message) {
  std::string line = first_message.substr(0, first_message.find('\n'));
  std::string out;
  bool space = false;
  for (char ch : line) {
    if (ch == ' ' || ch == '\t' || ch == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += ch;
  }
  constexpr size_t kMax = 48;
  if (out.size() <= kMax) return out;
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  return out.substr(0, cut) + "...";
}

std::string ChatFileName(std::time_t start, const std::string& title) {
  std::tm tm{};
  localtime_r(&start, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d_%H-%M-%S", &tm);
  std::string slug;
  for (unsigned char ch : title) {
    if (std::isalnum(ch) != 0 && ch < 0x80) {
      slug += static_cast<char>(std::tolower(ch));
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
    if (slug.size() >= 40) break;
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug.empty() ? Cat(when, kSuffix) : Cat(when, "_", slug, kSuffix);
}

std::string ReadChatTitle(const std::string& text) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    if (text.compare(at, std::strlen(kTitleLine), kTitleLine) == 0)
      return text.substr(at + std::strlen(kTitleLine), end - at - std::strlen(kTitleLine));
    if (text.compare(at, 3, "---") == 0) break;  // the header ends at the first turn
    at = end + 1;
  }
  return "";
}

std::string WithChatTitle(const std::string& transcript_text, const std::string& title) {
  std::string clean;  // one line
  for (char ch : title) clean += (ch == '\n' || ch == '\r') ? ' ' : ch;
  const size_t first = transcript_text.find('\n');
  if (first == std::string::npos) return transcript_text + "\n" + kTitleLine + clean + "\n";
  return transcript_text.substr(0, first + 1) + kTitleLine + clean + "\n" +
         transcript_text.substr(first + 1);
}

std::string WriteFileAtomically(const std::string& path, const std::string& text) {
  const fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) {
    fs::create_directories(p.parent_path(), ec);
    if (ec) return Cat("cannot create ", p.parent_path().string(), ": ", ec.message());
  }
  const std::string tmp = Cat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::strerror(errno);
  std::string why;
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0 && why.empty()) {
    const ssize_t w = ::write(fd, data, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      why = std::strerror(errno);
    else {
      data += w;
      left -= static_cast<size_t>(w);
    }
  }
  if (why.empty() && ::fsync(fd) != 0) why = std::strerror(errno);
  if (::close(fd) != 0 && why.empty()) why = std::strerror(errno);
  if (why.empty() && std::rename(tmp.c_str(), path.c_str()) != 0) why = std::strerror(errno);
  if (!why.empty()) {
    ::unlink(tmp.c_str());
    return why;
  }
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return "";
}

}  // namespace wc
