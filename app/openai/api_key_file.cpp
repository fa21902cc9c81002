#include "app/openai/api_key_file.h"

#include <cstdint>

#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {

std::string ReadApiKeyFile(const std::string& path) {
  std::string key;
  try {
    key = ReadTextFile(path, /*max_bytes=*/4096);
  } catch (const Error& e) {
    throw Error(Cat("--api-key-file: ", e.what()));
  }
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' '))
    key.pop_back();
  if (key.empty()) throw Error(Cat("--api-key-file ", path, ": is empty"));
  if (key.find_first_of("\r\n") != std::string::npos)
    throw Error(Cat("--api-key-file ", path, ": holds more than one line"));
  return key;
}

}  // namespace wc
