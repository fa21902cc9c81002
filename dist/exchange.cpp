#include "dist/exchange.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace wc {

std::vector<std::string> AllGatherBytes(Communicator& comm, const std::string& mine) {
  const size_t n = static_cast<size_t>(comm.size());
  const uint64_t my_size = mine.size();
  std::vector<uint64_t> sizes(n);  // [ranks]
  comm.AllGather(&my_size, sizeof my_size, sizes.data());
  const size_t width = *std::max_element(sizes.begin(), sizes.end());
  std::string padded(width, '\0');
  std::memcpy(padded.data(), mine.data(), mine.size());
  std::string all(width * n, '\0');  // [ranks, width]
  if (width > 0) comm.AllGather(padded.data(), width, all.data());
  std::vector<std::string> out(n);
  for (size_t r = 0; r < n; ++r) out[r] = all.substr(r * width, sizes[r]);
  return out;
}

void BroadcastBytes(Communicator& comm, std::string* data, int root) {
  uint64_t size = data->size();
  comm.Broadcast(&size, sizeof size, root);
  data->resize(size);
  if (size > 0) comm.Broadcast(data->data(), size, root);
}

std::string WireReader::Str() {
  const uint32_t n = U32();
  if (n > bytes_.size() - pos_)
    throw Error(Cat(what_, ": a string of ", n, " bytes runs past the message's end (",
                    bytes_.size() - pos_, " left)"));
  std::string s = bytes_.substr(pos_, n);
  pos_ += n;
  return s;
}

void WireReader::Take(void* out, size_t n) {
  if (n > bytes_.size() - pos_)
    throw Error(Cat(what_, ": the message ends early (", bytes_.size(), " bytes)"));
  std::memcpy(out, bytes_.data() + pos_, n);
  pos_ += n;
}

}  // namespace wc
