// `wormchat batch` output: one JSON record per request in the format vLLM's run-batch writes, and
// the writer that makes them durable and lets a rerun resume.
//
// A record (one line, keys in this order, no timestamps so reruns are byte-for-byte equal):
//   {"id": "batch-N", "custom_id": ..., "response": {"status_code": 200, "request_id": "batch-N",
//    "body": <text_completion or chat.completion>}, "error": null}
//   {"id": "batch-N", "custom_id": ... | null, "response": null,
//    "error": {"code": "invalid_request" | "internal_error", "message": "line N: ..."}}
// where N is the request's 1-based input line.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "serving/request.h"

namespace wc {

// "batch-N": a record's id, also its key for resuming.
std::string BatchRecordId(int line);

// The record of a request that ran (RequestResult reason other than kError/kCancelled). `chat`
// picks the chat.completion body, else text_completion; `model` is the body's "model".
std::string SuccessRecord(int line, const std::string& custom_id, bool chat,
                          const std::string& model, const RequestResult& result);
// The record of a request that failed; `message` starts with "line N:".
std::string ErrorRecord(int line, const std::optional<std::string>& custom_id, const char* code,
                        const std::string& message);

// Appends records to an output file, each written whole, flushed and fsynced before Append
// returns. Opening reads the records an earlier run left (so they are skipped) and first cuts away
// a torn last line: one without its '\n' or that is not a JSON record, as a run killed mid-write
// leaves it (only if it begins like a record: a file that is not batch output is never cut).
// Holds an exclusive lock on the file while open.
class BatchWriter {
 public:
  // Opens or creates `path`. Throws wc::Error naming -o and the path if it cannot be opened, is
  // in use by another run, or holds a line that is neither a record nor a torn one.
  explicit BatchWriter(const std::string& path);
  ~BatchWriter();
  BatchWriter(const BatchWriter&) = delete;
  BatchWriter& operator=(const BatchWriter&) = delete;

  // Records already in the file: id -> whether it is an error record.
  const std::map<std::string, bool>& existing() const { return existing_; }
  // Bytes of a torn last line cut away when opening (0 if none).
  size_t repaired_bytes() const { return repaired_bytes_; }

  // Appends `record` and '\n', then fsyncs. Throws wc::Error naming the file on failure.
  void Append(const std::string& record);

 private:
  std::string path_;
  int fd_ = -1;
  std::map<std::string, bool> existing_;
  size_t repaired_bytes_ = 0;
};

}  // namespace wc
