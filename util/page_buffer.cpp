#include "util/page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "util/error.h"

namespace wc {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

PageBuffer::PageBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  // Room to round the start up to a huge-page boundary.
  map_bytes_ = bytes + (bytes >= kHugePage ? kHugePage : 0);
  map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error(Cat("cannot map ", bytes >> 20, " MiB for the KV cache: ", std::strerror(errno),
                    "; lower --ctx or --users"));
  }
  const auto start = reinterpret_cast<uintptr_t>(map_);
  const uintptr_t aligned =
      bytes >= kHugePage ? (start + kHugePage - 1) / kHugePage * kHugePage : start;
  data_ = reinterpret_cast<uint8_t*>(aligned);
#ifdef MADV_HUGEPAGE
  if (bytes >= kHugePage) madvise(data_, bytes, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
}

PageBuffer::~PageBuffer() {
  Release();
}

PageBuffer::PageBuffer(PageBuffer&& other) noexcept {
  *this = std::move(other);
}

PageBuffer& PageBuffer::operator=(PageBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void PageBuffer::Release() {
  if (map_ != nullptr) munmap(map_, map_bytes_);
  map_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace wc
