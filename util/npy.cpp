#include "util/npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "util/error.h"
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

NpyArray ReadNpyF32(const std::string& path) {
  const std::string bytes = ReadTextFile(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw Error(Cat(path, ": not a .npy file"));
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8;
    offset = 10;
  } else {
    if (bytes.size() < 12) throw Error(Cat(path, ": truncated .npy header"));
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  }
  if (offset + header_len > bytes.size()) throw Error(Cat(path, ": truncated .npy header"));
  const std::string header = bytes.substr(offset, header_len);
  if (header.find("'<f4'") == std::string::npos) throw Error(Cat(path, ": dtype is not '<f4'"));
  if (header.find("'fortran_order': False") == std::string::npos)
    throw Error(Cat(path, ": Fortran-order arrays are not supported"));
  const size_t lp = header.find('('), rp = header.find(')');
  if (lp == std::string::npos || rp == std::string::npos) throw Error(Cat(path, ": no shape"));
  NpyArray arr;
  int64_t count = 1;
  std::string dims = header.substr(lp + 1, rp - lp - 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t comma = dims.find(',', pos);
    std::string tok =
        dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok.find_first_not_of(' ') != std::string::npos) {
      arr.shape.push_back(std::stoll(tok));
      count *= arr.shape.back();
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  const size_t data_off = offset + header_len;
  if (bytes.size() - data_off != static_cast<size_t>(count) * 4)
    throw Error(Cat(path, ": data size does not match shape"));
  arr.data.resize(static_cast<size_t>(count));
  std::memcpy(arr.data.data(), bytes.data() + data_off, static_cast<size_t>(count) * 4);
  return arr;
}

}  // namespace wc
