#include "util/npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {

void WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
    count *= shape[i];
  }
  if (shape.size() == 1) dict.pop_back();  // "(n, " -> "(n,"
  dict += "), }";
  // Magic (6) + version (2) + header length (2) + dict + padding + '\n' is a multiple of 64.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(Cat(path, ": cannot write: ", std::strerror(errno)));
  const uint16_t header_len = static_cast<uint16_t>(dict.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&header_len), 2);
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * 4));
  if (!out) throw Error(Cat(path, ": write failed (disk full?)"));
}

NpyArray ParseNpyF32(std::string_view bytes, const std::string& path) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY")
    throw Error(Cat(path, ": not a .npy file"));
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw Error(Cat(path, ": truncated .npy header"));
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  } else {
    throw Error(Cat(path, ": .npy format version ", int{major}, " is not supported (1, 2 or 3)"));
  }
  if (header_len > bytes.size() - offset) throw Error(Cat(path, ": truncated .npy header"));
  const std::string_view header = bytes.substr(offset, header_len);
  if (header.find("'descr': '<f4'") == std::string_view::npos)
    throw Error(Cat(path, ": dtype is not '<f4' (little-endian float32)"));
  if (header.find("'fortran_order': False") == std::string_view::npos)
    throw Error(Cat(path, ": Fortran-order arrays are not supported"));
  const size_t key = header.find("'shape':");
  const size_t lp = key == std::string_view::npos ? key : header.find('(', key);
  const size_t rp = lp == std::string_view::npos ? lp : header.find(')', lp);
  if (rp == std::string_view::npos) throw Error(Cat(path, ": the header has no 'shape': (...)"));
  NpyArray arr;
  uint64_t count = 1;
  const std::string_view dims = header.substr(lp + 1, rp - lp - 1);
  size_t pos = 0;
  while (pos <= dims.size()) {
    size_t comma = dims.find(',', pos);
    if (comma == std::string_view::npos) comma = dims.size();
    std::string_view tok = dims.substr(pos, comma - pos);
    while (!tok.empty() && tok.front() == ' ') tok.remove_prefix(1);
    while (!tok.empty() && tok.back() == ' ') tok.remove_suffix(1);
    if (!tok.empty()) {
      uint64_t d = 0;
      for (const char c : tok) {
        if (c < '0' || c > '9' || __builtin_mul_overflow(d, uint64_t{10}, &d) ||
            __builtin_add_overflow(d, static_cast<uint64_t>(c - '0'), &d) ||
            d > uint64_t{INT64_MAX})
          throw Error(
              Cat(path, ": shape entry '", Printable(tok, 40), "' is not a non-negative integer"));
      }
      if (arr.shape.size() >= 64) throw Error(Cat(path, ": shape has more than 64 dimensions"));
      arr.shape.push_back(static_cast<int64_t>(d));
      if (__builtin_mul_overflow(count, d, &count) || count > uint64_t{INT64_MAX} / 4)
        throw Error(Cat(path, ": shape ", Printable(dims, 80), " has too many elements"));
    }
    pos = comma + 1;
  }
  const size_t data_off = offset + header_len;
  if (bytes.size() - data_off != count * 4)
    throw Error(Cat(path, ": ", bytes.size() - data_off, " data bytes do not match shape (",
                    Printable(dims, 80), ") of float32 (", count * 4, " bytes)"));
  arr.data.resize(static_cast<size_t>(count));
  if (count > 0) std::memcpy(arr.data.data(), bytes.data() + data_off, count * 4);
  return arr;
}

NpyArray ReadNpyF32(const std::string& path) {
  return ParseNpyF32(ReadTextFile(path), path);
}

}  // namespace wc
