// A large zero-initialized byte buffer for hot streamed data (the KV cache): mapped directly from
// the kernel, aligned to 2 MiB and, on Linux, marked for transparent huge pages, so streaming
// through tens of MiB walks a few hundred TLB entries instead of thousands.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wc {

class PageBuffer {
 public:
  PageBuffer() = default;
  // bytes zeros. Throws wc::Error when the memory cannot be mapped.
  explicit PageBuffer(size_t bytes);
  ~PageBuffer();
  PageBuffer(PageBuffer&& other) noexcept;
  PageBuffer& operator=(PageBuffer&& other) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void Release();
  void* map_ = nullptr;  // the whole mapping (data_ rounded up to 2 MiB inside it)
  size_t map_bytes_ = 0;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace wc
