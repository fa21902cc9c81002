#include "util/json_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

using nlohmann::json;

// `s` cut to at most `n` bytes, not inside a UTF-8 character.
std::string_view CutAt(std::string_view s, size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

std::string JsonErrorText(const json::exception& e) {
  std::string s = e.what();
  if (!s.empty() && s[0] == '[') {
    const size_t close = s.find("] ");
    if (close != std::string::npos) s.erase(0, close + 2);
  }
  return s;
}

namespace {

// The keys leading to the value being parsed ("rope_scaling.factor"), kept by the parser callback.
class KeyPath {
 public:
  void Enter(int depth) { keys_.resize(static_cast<size_t>(depth) + 1); }
  void Leave(int depth) { keys_.resize(static_cast<size_t>(depth)); }
  void Key(int depth, const std::string& key) {
    if (depth >= 1 && static_cast<size_t>(depth) <= keys_.size()) keys_[depth - 1] = key;
  }
  std::string Joined() const {
    std::string s;
    for (const std::string& k : keys_) {
      if (k.empty()) continue;
      s += (s.empty() ? "" : ".") + Printable(k);
    }
    return s;
  }

 private:
  std::vector<std::string> keys_;  // [depth]: the key in the object at that depth ("" in arrays)
};

template <typename T>
T IntegerAs(const json& v, const std::string& what) {
  bool ok = false;
  if (v.is_number_unsigned()) {
    ok = v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    ok = std::numeric_limits<T>::is_signed
             ? x >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                   x <= static_cast<int64_t>(std::numeric_limits<T>::max())
             : x >= 0;
  }
  if (!ok)
    throw Error(Cat(what, " must be an integer in [", +std::numeric_limits<T>::min(), ", ",
                    +std::numeric_limits<T>::max(), "], got ", JsonSnippet(v)));
  return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>())
                                : static_cast<T>(v.get<int64_t>());
}

template <typename T>
T FloatAs(const json& v, const std::string& what) {
  // Every JSON number converts to double without overflow; a double beyond T's range does not
  // convert to T (undefined behaviour), so the range is checked on the double.
  const double x = v.is_number() ? v.get<double>() : 0.0;
  if (!v.is_number() || !std::isfinite(x) ||
      std::fabs(x) > static_cast<double>(std::numeric_limits<T>::max()))
    throw Error(Cat(what, " must be a finite number (magnitude at most ",
                    std::numeric_limits<T>::max(), "), got ", JsonSnippet(v)));
  return static_cast<T>(x);
}

template <typename T>
std::vector<T> VectorAs(const json& v, const std::string& what) {
  if (!v.is_array()) throw Error(Cat(what, " must be an array, got ", JsonSnippet(v)));
  std::vector<T> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) out.push_back(JsonAs<T>(v[i], Cat(what, "[", i, "]")));
  return out;
}

}  // namespace

std::string Printable(std::string_view s, size_t max_chars) {
  std::string out;
  const std::string_view kept = CutAt(s, max_chars);
  for (size_t i = 0; i < kept.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (kept.size() < s.size()) out += "...";
  return out;
}

std::string JsonSnippet(const json& v, size_t max_chars) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() <= max_chars) return s;
  return std::string(CutAt(s, max_chars > 3 ? max_chars - 3 : 0)) + "...";
}

json ParseJson(std::string_view text, const std::string& path) {
  KeyPath keys;
  const json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kJsonMaxDepth) {
          const std::string key = keys.Joined();
          throw JsonError(
              path,
              Cat(key.empty() ? "" : "key '", key, key.empty() ? "" : "': ", "nested deeper than ",
                  kJsonMaxDepth, " levels of arrays and objects"),
              0);
        }
        keys.Enter(depth);
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        keys.Leave(depth);  // the depth of the container that ends, as at its start
        break;
      case json::parse_event_t::key:
        keys.Key(depth, parsed.get<std::string>());
        break;
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::parse_error& e) {
    throw JsonError(path, Cat("invalid JSON: ", JsonErrorText(e)), e.byte == 0 ? 1 : e.byte);
  } catch (const json::exception& e) {  // out_of_range: a number such as 1e400
    const std::string key = keys.Joined();
    throw JsonError(
        path, Cat(key.empty() ? "" : "key '", key, key.empty() ? "" : "': ", JsonErrorText(e)), 0);
  }
}

json ReadJsonFile(const std::string& path, size_t max_bytes) {
  return ParseJson(ReadTextFile(path, static_cast<int64_t>(max_bytes)), path);
}

template <>
bool JsonAs<bool>(const json& v, const std::string& what) {
  if (!v.is_boolean()) throw Error(Cat(what, " must be true or false, got ", JsonSnippet(v)));
  return v.get<bool>();
}
template <>
int JsonAs<int>(const json& v, const std::string& what) {
  return IntegerAs<int>(v, what);
}
template <>
int64_t JsonAs<int64_t>(const json& v, const std::string& what) {
  return IntegerAs<int64_t>(v, what);
}
template <>
uint64_t JsonAs<uint64_t>(const json& v, const std::string& what) {
  return IntegerAs<uint64_t>(v, what);
}
template <>
float JsonAs<float>(const json& v, const std::string& what) {
  return FloatAs<float>(v, what);
}
template <>
double JsonAs<double>(const json& v, const std::string& what) {
  return FloatAs<double>(v, what);
}
template <>
std::string JsonAs<std::string>(const json& v, const std::string& what) {
  if (!v.is_string()) throw Error(Cat(what, " must be a string, got ", JsonSnippet(v)));
  return v.get<std::string>();
}
template <>
std::vector<float> JsonAs<std::vector<float>>(const json& v, const std::string& what) {
  return VectorAs<float>(v, what);
}
template <>
std::vector<int64_t> JsonAs<std::vector<int64_t>>(const json& v, const std::string& what) {
  return VectorAs<int64_t>(v, what);
}
template <>
std::vector<std::string> JsonAs<std::vector<std::string>>(const json& v, const std::string& what) {
  return VectorAs<std::string>(v, what);
}

template <typename T>
std::optional<T> JsonFind(const json& obj, const std::string& key, const std::string& path) {
  if (!obj.is_object()) throw Error(Cat(path, ": expected a JSON object, got ", JsonSnippet(obj)));
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  return JsonAs<T>(*it, Cat(path, ": key '", key, "'"));
}

template <typename T>
T JsonGet(const json& obj, const std::string& key, const std::string& path) {
  std::optional<T> v = JsonFind<T>(obj, key, path);
  if (!v) throw Error(Cat(path, ": missing key '", key, "'"));
  return std::move(*v);
}

#define WC_JSON_INSTANTIATE(T)                                                \
  template T JsonGet<T>(const json&, const std::string&, const std::string&); \
  template std::optional<T> JsonFind<T>(const json&, const std::string&, const std::string&);
WC_JSON_INSTANTIATE(bool)
WC_JSON_INSTANTIATE(int)
WC_JSON_INSTANTIATE(int64_t)
WC_JSON_INSTANTIATE(uint64_t)
WC_JSON_INSTANTIATE(float)
WC_JSON_INSTANTIATE(double)
WC_JSON_INSTANTIATE(std::string)
WC_JSON_INSTANTIATE(std::vector<float>)
WC_JSON_INSTANTIATE(std::vector<int64_t>)
WC_JSON_INSTANTIATE(std::vector<std::string>)
#undef WC_JSON_INSTANTIATE

void WriteJsonOutput(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text << "\n";
  if (!f) throw Error(Cat("--json ", path, ": cannot write the file"));
}

}  // namespace wc
