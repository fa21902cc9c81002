// A read-only memory-mapped file. Weights are used in place from the mapping (no copies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace wc {

class MappedFile {
 public:
  // Maps `path` read-only. Throws wc::Error naming the path if it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) file into a string: a regular file, or a pipe or device read as a stream.
// Throws wc::Error naming the path when it cannot be read, is a directory, or holds more than
// `max_bytes` (a regular file's size is checked before reading; a stream is cut off after
// max_bytes + 1, so /dev/zero is refused too and nothing larger than the cap is allocated).
std::string ReadTextFile(const std::string& path, int64_t max_bytes = int64_t{1} << 30);

// Drops this process's resident pages of [data, data + bytes) (whole pages inside the range) from
// a read-only file mapping: they stop counting in the RSS and are read back from the page cache if
// touched again. For weights that were copied elsewhere (packed) and are rarely read after.
void ReleaseMappedPages(const void* data, size_t bytes);

// Tells the kernel that [data, data + bytes) of a file mapping (whole pages inside the range) is
// read at random places, a few KiB at a time: a page fault there reads no megabytes ahead into the
// page cache. A hint: failure is harmless.
void AdviseRandomAccess(const void* data, size_t bytes);

bool FileExists(const std::string& path);
// Why `path` cannot be read as a regular file, for messages: "" when it can; else "missing", "is a
// directory, expected a file", "is not a regular file" (a device, a FIFO), or the system's reason
// ("Too many levels of symbolic links", "Permission denied").
std::string FileProblem(const std::string& path);
bool DirExists(const std::string& path);
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace wc
