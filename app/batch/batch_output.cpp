#include "app/batch/batch_output.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace wc {

using ojson = nlohmann::ordered_json;

std::string BatchRecordId(int line) {
  return Cat("batch-", line);
}

namespace {

std::string Dump(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

const char* FinishReason(StopReason reason) {
  const char* name = FinishReasonName(reason);
  WC_CHECK(name != nullptr, "no finish_reason for ", StopReasonName(reason));
  return name;
}

}  // namespace

std::string SuccessRecord(int line, const std::string& custom_id, bool chat,
                          const std::string& model, const RequestResult& result) {
  const std::string id = BatchRecordId(line);
  // A beam request returns its hypotheses as the choices, best first; a sampled one its text.
  std::vector<BeamSequence> sequences = result.sequences;
  if (sequences.empty()) {
    BeamSequence s;
    s.tokens = result.tokens;
    s.text = result.text;
    s.reason = result.reason;
    sequences.push_back(std::move(s));
  }
  int completion_tokens = 0;
  ojson choices = ojson::array();
  for (size_t i = 0; i < sequences.size(); ++i) {
    const BeamSequence& s = sequences[i];
    completion_tokens += static_cast<int>(s.tokens.size());
    ojson choice;
    choice["index"] = i;
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", s.text}};
    } else {
      choice["text"] = s.text;
    }
    choice["finish_reason"] = FinishReason(s.reason);
    if (!chat) choice["logprobs"] = nullptr;
    choices.push_back(std::move(choice));
  }
  ojson body;
  body["id"] = (chat ? "chatcmpl-" : "cmpl-") + id;
  body["object"] = chat ? "chat.completion" : "text_completion";
  body["model"] = model;
  body["choices"] = std::move(choices);
  // OpenAI's usage, with prompt_tokens_details.cached_tokens: the prompt tokens whose K/V came from
  // the prefix cache (whole blocks; 0 with --prefix-cache off).
  body["usage"] = {{"prompt_tokens", result.prompt_tokens},
                   {"completion_tokens", completion_tokens},
                   {"total_tokens", result.prompt_tokens + completion_tokens},
                   {"prompt_tokens_details", {{"cached_tokens", result.cached_tokens}}}};
  ojson rec;
  rec["id"] = id;
  rec["custom_id"] = custom_id;
  rec["response"] = {{"status_code", 200}, {"request_id", id}, {"body", std::move(body)}};
  rec["error"] = nullptr;
  return Dump(rec);
}

std::string ErrorRecord(int line, const std::optional<std::string>& custom_id, const char* code,
                        const std::string& message) {
  ojson rec;
  rec["id"] = BatchRecordId(line);
  rec["custom_id"] = custom_id ? ojson(*custom_id) : ojson(nullptr);
  rec["response"] = nullptr;
  rec["error"] = {{"code", code}, {"message", message}};
  return Dump(rec);
}

namespace {

// The record's id and whether it is an error record; nullopt if `line` is not a record.
std::optional<std::pair<std::string, bool>> ParseRecord(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const auto id = j.find("id");
  if (id == j.end() || !id->is_string()) return std::nullopt;
  const auto error = j.find("error");
  return std::make_pair(id->get<std::string>(), error != j.end() && !error->is_null());
}

// Whether a torn line can be the start of one of our records (so cutting it loses nothing else).
bool LooksLikeRecordStart(const std::string& line) {
  static const std::string head = "{\"id\":\"batch-";
  return line.compare(0, head.size(), head, 0, std::min(head.size(), line.size())) == 0;
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

BatchWriter::BatchWriter(const std::string& path) : path_(path) {
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw Error(Cat("-o ", path, ": cannot open for writing: ", std::strerror(err),
                    err == ENOENT ? " (does its directory exist?)" : ""));
  }
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    close(fd_);
    throw Error(Cat("-o ", path, ": in use by another wormchat batch run"));
  }
  std::string data;
  char buf[1 << 16];
  ssize_t n;
  while ((n = pread(fd_, buf, sizeof buf, static_cast<off_t>(data.size()))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd_);
      throw Error(Cat("-o ", path, ": cannot read: ", std::strerror(err)));
    }
    data.append(buf, static_cast<size_t>(n));
  }
  // Complete lines are records; the last line may be torn.
  size_t start = 0, keep = 0;
  int line_no = 0;
  while (start < data.size()) {
    const size_t end = data.find('\n', start);
    ++line_no;
    const bool last = end == std::string::npos || end + 1 == data.size();
    const std::string line =
        data.substr(start, (end == std::string::npos ? data.size() : end) - start);
    const auto record = end == std::string::npos ? std::nullopt : ParseRecord(line);
    const bool blank = line.find_first_not_of(" \t\r") == std::string::npos;
    if (record) {
      existing_[record->first] = record->second;
      keep = end + 1;
    } else if (blank && !last) {
      keep = end + 1;  // a blank line
    } else if (!last || !(blank || LooksLikeRecordStart(line))) {
      close(fd_);
      throw Error(Cat("-o ", path, ": line ", line_no,
                      " is not a batch record; this is not the output of wormchat batch (or it "
                      "was edited): pass another -o"));
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (keep < data.size()) {
    repaired_bytes_ = data.size() - keep;
    if (ftruncate(fd_, static_cast<off_t>(keep)) != 0 || fsync(fd_) != 0) {
      const int err = errno;
      close(fd_);
      throw Error(Cat("-o ", path, ": cannot cut away its torn last line: ", std::strerror(err)));
    }
  }
  // Make the file's own directory entry durable too (it may have just been created).
  const int dir = open(DirOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    fsync(dir);
    close(dir);
  }
}

BatchWriter::~BatchWriter() {
  if (fd_ >= 0) close(fd_);
}

void BatchWriter::Append(const std::string& record) {
  const std::string line = record + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(Cat("-o ", path_, ": cannot write: ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  while (fsync(fd_) != 0) {
    if (errno != EINTR) throw Error(Cat("-o ", path_, ": cannot sync: ", std::strerror(errno)));
  }
}

}  // namespace wc
