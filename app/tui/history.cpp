#include "app/tui/history.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "serving/text_stream.h"
#include "util/error.h"

namespace wc::tui {
namespace {

bool IsBlankEntry(std::string_view s) {
  return s.find_first_not_of(" \t\n\r\v\f") == std::string_view::npos;
}

enum class ReadResult { kMissing, kRead, kUnreadable };

// Reads the history file into `entries` (the newest kMaxEntries valid lines). `warning` gets one
// line for an unreadable file or skipped lines.
ReadResult ReadHistoryFile(const std::string& path, std::vector<std::string>* entries,
                           std::string* warning) {
  entries->clear();
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return ReadResult::kMissing;
    *warning = Cat("history file ", path, ": ", std::strerror(errno),
                   "; history will not be saved this session");
    return ReadResult::kUnreadable;
  }
  if (!S_ISREG(st.st_mode)) {
    *warning = Cat("history file ", path, " is not a regular file; history will not be saved");
    return ReadResult::kUnreadable;
  }
  std::ifstream in(path, std::ios::binary);
  std::string content;
  if (in) content.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) {
    *warning = Cat("history file ", path, ": cannot read it (", std::strerror(errno),
                   "); history will not be saved this session");
    return ReadResult::kUnreadable;
  }
  int bad = 0, first_bad = 0, line_no = 0;
  for (size_t begin = 0; begin < content.size();) {
    size_t end = content.find('\n', begin);
    if (end == std::string::npos) end = content.size();
    ++line_no;
    std::string entry;
    if (History::Unescape(std::string_view(content).substr(begin, end - begin), &entry)) {
      entries->push_back(std::move(entry));
    } else if (bad++ == 0) {
      first_bad = line_no;
    }
    begin = end + 1;
  }
  if (entries->size() > History::kMaxEntries)
    entries->erase(entries->begin(), entries->end() - History::kMaxEntries);
  if (bad > 0) {
    *warning = Cat("history file ", path, ": skipped ", bad, bad == 1 ? " line" : " lines",
                   " that could not be read (first: line ", first_bad,
                   "); they are dropped at the next save");
  }
  return ReadResult::kRead;
}

// mkdir -p with mode 0700 for the directories it creates. Returns "" or what failed.
std::string MakeDirs(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (!prefix.empty() && mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
      return Cat("cannot create directory ", prefix, ": ", std::strerror(errno));
    if (slash == std::string::npos) break;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Cat("cannot create directory ", dir, ": a file of that name is in the way");
  return "";
}

bool WriteAll(int fd, const std::string& bytes) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Replaces `path` with `bytes` atomically. Returns "" or what failed.
std::string WriteAtomically(const std::string& path, const std::string& bytes) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmp.data());  // mode 0600
  if (fd < 0) return Cat("cannot create a temporary file in ", dir, ": ", std::strerror(errno));
  const bool ok = WriteAll(fd, bytes) && fsync(fd) == 0;
  const int err = errno;
  if (close(fd) != 0 || !ok) {
    unlink(tmp.c_str());
    return Cat("cannot write ", tmp, ": ", std::strerror(ok ? errno : err));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlink(tmp.c_str());
    return Cat("cannot rename ", tmp, " to ", path, ": ", why);
  }
  // The rename itself is durable once the directory is synced; failing that loses nothing now.
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return "";
}

}  // namespace

History::History(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  can_save_ = ReadHistoryFile(path_, &entries_, &warning_) != ReadResult::kUnreadable;
  EndWalk();
}

std::string History::DefaultPath() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/') return Cat(state, "/wormchat/history");
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return Cat(home, "/.local/state/wormchat/history");
  return "";
}

bool History::Add(std::string_view raw) {
  EndWalk();
  const std::string entry = SanitizeUtf8(raw);
  if (IsBlankEntry(entry) || (!entries_.empty() && entries_.back() == entry)) return false;
  entries_.push_back(entry);
  unsaved_.push_back(entry);
  Trim();
  EndWalk();
  return true;
}

std::string History::Save() {
  if (path_.empty() || !can_save_ || unsaved_.empty()) return "";
  const size_t slash = path_.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string why = MakeDirs(path_.substr(0, slash));
    if (!why.empty()) return Cat("history not saved: ", why);
  }
  // Another session may have saved since we loaded: keep its entries, then ours.
  std::vector<std::string> merged;
  std::string read_warning;
  if (ReadHistoryFile(path_, &merged, &read_warning) == ReadResult::kUnreadable)
    return Cat("history not saved: ", read_warning);
  for (const std::string& e : unsaved_) {
    if (merged.empty() || merged.back() != e) merged.push_back(e);
  }
  if (merged.size() > kMaxEntries) merged.erase(merged.begin(), merged.end() - kMaxEntries);
  std::string bytes;
  for (const std::string& e : merged) {
    bytes += Escape(e);
    bytes += '\n';
  }
  const std::string why = WriteAtomically(path_, bytes);
  if (!why.empty()) return Cat("history not saved: ", why);
  unsaved_.clear();
  return "";
}

std::optional<std::string> History::Older(std::string_view current) {
  if (pos_ == 0) return std::nullopt;
  if (pos_ < entries_.size() && current == entries_[pos_]) {
    edits_.erase(pos_);
  } else {
    edits_[pos_] = std::string(current);
  }
  --pos_;
  const auto edit = edits_.find(pos_);
  return edit != edits_.end() ? edit->second : entries_[pos_];
}

std::optional<std::string> History::Newer(std::string_view current) {
  if (pos_ >= entries_.size()) return std::nullopt;
  if (current == entries_[pos_]) {
    edits_.erase(pos_);
  } else {
    edits_[pos_] = std::string(current);
  }
  ++pos_;
  const auto edit = edits_.find(pos_);
  if (edit != edits_.end()) return edit->second;
  return pos_ < entries_.size() ? entries_[pos_] : std::string();
}

void History::EndWalk() {
  pos_ = entries_.size();
  edits_.clear();
}

std::string History::Escape(std::string_view entry) {
  std::string out;
  out.reserve(entry.size());
  for (const char c : entry) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

bool History::Unescape(std::string_view line, std::string* entry) {
  entry->clear();
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\') {
      *entry += line[i];
      continue;
    }
    if (++i == line.size()) return false;  // a lone backslash at the end
    if (line[i] == '\\') {
      *entry += '\\';
    } else if (line[i] == 'n') {
      *entry += '\n';
    } else {
      return false;
    }
  }
  // What Add would store: valid UTF-8, no control characters but '\n' and '\t', not blank.
  return !IsBlankEntry(*entry) && SanitizeUtf8(*entry) == *entry;
}

void History::Trim() {
  if (entries_.size() > kMaxEntries) entries_.erase(entries_.begin(), entries_.end() - kMaxEntries);
  if (unsaved_.size() > kMaxEntries) unsaved_.erase(unsaved_.begin(), unsaved_.end() - kMaxEntries);
}

}  // namespace wc::tui
