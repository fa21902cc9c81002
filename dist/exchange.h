// Byte messages over a Communicator (dist/communicator.h): a variable-size all-gather and
// broadcast, and the writer/reader of the messages' fields. Ranks run the same build on the same
// architecture, so fields travel in the host's own byte order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace wc {

// Every rank's `mine`, in rank order, on every rank (sizes may differ between ranks).
std::vector<std::string> AllGatherBytes(Communicator& comm, const std::string& mine);
// root's `*data` (any size) replaces `*data` on every rank.
void BroadcastBytes(Communicator& comm, std::string* data, int root);

// Appends fixed-size fields and length-prefixed strings to a message.
class WireWriter {
 public:
  void U32(uint32_t v) { Raw(&v, sizeof v); }
  void I64(int64_t v) { Raw(&v, sizeof v); }
  void F64(double v) { Raw(&v, sizeof v); }
  void Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    bytes_ += s;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void Raw(const void* p, size_t n) { bytes_.append(static_cast<const char*>(p), n); }
  std::string bytes_;
};

// Reads a WireWriter's message back in the same order. Throws wc::Error naming `what` (e.g. "rank
// 1's batch report") if the message ends early: a peer running another build or protocol.
class WireReader {
 public:
  WireReader(const std::string& bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  uint32_t U32() { return Fixed<uint32_t>(); }
  int64_t I64() { return Fixed<int64_t>(); }
  double F64() { return Fixed<double>(); }
  std::string Str();
  bool done() const { return pos_ == bytes_.size(); }

 private:
  template <typename T>
  T Fixed() {
    T v;
    Take(&v, sizeof v);
    return v;
  }
  void Take(void* out, size_t n);
  const std::string& bytes_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace wc
