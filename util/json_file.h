// Reading JSON files users hand us (config.json, kv_scales.json, chat_format.json, the safetensors
// index, batch lines): every failure of nlohmann (syntax, a number out of range such as 1e400, a
// wrong type) becomes a one-line wc::Error naming the file and, where there is one, the key.
// Inputs are bounded before they cost memory: files by size (kJsonFileMaxBytes unless told),
// documents by nesting depth (kJsonMaxDepth).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace wc {

// Largest config-like JSON file read by default (real ones are a few KB; a sharded checkpoint's
// index a few hundred KB).
constexpr size_t kJsonFileMaxBytes = size_t{16} << 20;
// Deepest nesting of arrays and objects accepted (real files nest 2-4 levels).
constexpr int kJsonMaxDepth = 64;

// What ParseJson throws: "PATH: REASON".
class JsonError : public Error {
 public:
  JsonError(const std::string& path, const std::string& reason, size_t byte)
      : Error(path.empty() ? reason : path + ": " + reason), reason_(reason), byte_(byte) {}
  // The message without the path ("invalid JSON: parse error at line 1, column 3: ...",
  // "key 'rope_theta': number overflow parsing '1e400'").
  const std::string& reason() const { return reason_; }
  // 1-based byte of a syntax error; 0 for the other problems.
  size_t byte() const { return byte_; }

 private:
  std::string reason_;
  size_t byte_;
};

// Parses `text`, read from `path` (named in messages). Throws JsonError for invalid JSON (with
// line and column), a number out of range (naming its key), or nesting deeper than kJsonMaxDepth.
nlohmann::json ParseJson(std::string_view text, const std::string& path);

// Reads and parses the file `path`. Throws wc::Error naming it when it cannot be read, is larger
// than `max_bytes` (checked before reading), or when ParseJson throws.
nlohmann::json ReadJsonFile(const std::string& path, size_t max_bytes = kJsonFileMaxBytes);

// `v` as a T, with `what` naming it in messages (e.g. "config.json: key 'n_layer'"). T is bool,
// int, int64_t, uint64_t, float, double, std::string, std::vector<float>, std::vector<int64_t>
// or std::vector<std::string>. Integers must be JSON integers within T's range; float and double
// must be finite numbers within T's range. Throws wc::Error "WHAT must be ..., got VALUE".
template <typename T>
T JsonAs(const nlohmann::json& v, const std::string& what);
// Defined in json_file.cpp for exactly these (declared here, before any use).
template <>
bool JsonAs<bool>(const nlohmann::json& v, const std::string& what);
template <>
int JsonAs<int>(const nlohmann::json& v, const std::string& what);
template <>
int64_t JsonAs<int64_t>(const nlohmann::json& v, const std::string& what);
template <>
uint64_t JsonAs<uint64_t>(const nlohmann::json& v, const std::string& what);
template <>
float JsonAs<float>(const nlohmann::json& v, const std::string& what);
template <>
double JsonAs<double>(const nlohmann::json& v, const std::string& what);
template <>
std::string JsonAs<std::string>(const nlohmann::json& v, const std::string& what);
template <>
std::vector<float> JsonAs<std::vector<float>>(const nlohmann::json& v, const std::string& what);
template <>
std::vector<int64_t> JsonAs<std::vector<int64_t>>(const nlohmann::json& v, const std::string& what);
template <>
std::vector<std::string> JsonAs<std::vector<std::string>>(const nlohmann::json& v,
                                                          const std::string& what);

// obj[key] as a T (JsonAs), named "PATH: key 'KEY'" in messages. Throws wc::Error when `obj` is
// not an object or the key is absent (or null).
template <typename T>
T JsonGet(const nlohmann::json& obj, const std::string& key, const std::string& path);

// The same, nullopt when the key is absent or null.
template <typename T>
std::optional<T> JsonFind(const nlohmann::json& obj, const std::string& key,
                          const std::string& path);

// Text from a file made fit for a one-line message: control bytes and DEL as \xNN, cut to about
// `max_chars` (a tensor name, a key, a shard file name).
std::string Printable(std::string_view s, size_t max_chars = 80);

// nlohmann's message without its "[json.exception.parse_error.101] " tag.
std::string JsonErrorText(const nlohmann::json::exception& e);

// `v` as JSON text for a message: invalid UTF-8 replaced, cut to about `max_chars`.
std::string JsonSnippet(const nlohmann::json& v, size_t max_chars = 40);

// Writes `text` and a newline to `path` (a bench's or experiment's --json). Throws wc::Error naming
// --json and the path if it cannot be written.
void WriteJsonOutput(const std::string& path, const std::string& text);

}  // namespace wc
