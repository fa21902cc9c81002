// config.json's keys read with a range check, each error naming the file and the key: what every
// architecture's parser shares (model/config.h).
#include "model/config.h"
#include "util/error.h"

namespace wc::config_keys {

using nlohmann::json;

const json* Find(const json& j, std::initializer_list<const char*> names, std::string* found) {
  for (const char* n : names) {
    auto it = j.find(n);
    if (it != j.end() && !it->is_null()) {
      *found = n;
      return &*it;
    }
  }
  return nullptr;
}

int Int(const json& j, std::initializer_list<const char*> names, const std::string& src,
        const int* fallback, int64_t min, int64_t max) {
  std::string key;
  const json* v = Find(j, names, &key);
  if (v == nullptr) {
    if (fallback != nullptr) return *fallback;
    throw Error(Cat(src, ": missing key '", *names.begin(), "'"));
  }
  // nlohmann keeps non-negative integers unsigned (and 2^64 - 1 does not fit int64_t); min >= 0.
  const bool in_range =
      v->is_number_unsigned()
          ? v->get<uint64_t>() >= static_cast<uint64_t>(min) &&
                v->get<uint64_t>() <= static_cast<uint64_t>(max)
          : v->is_number_integer() && v->get<int64_t>() >= min && v->get<int64_t>() <= max;
  if (!in_range)
    throw Error(Cat(src, ": key '", key, "' must be an integer in [", min, ", ", max, "], got ",
                    v->dump()));
  return static_cast<int>(v->get<int64_t>());
}

bool Bool(const json& j, std::initializer_list<const char*> names, const std::string& src,
          bool fallback) {
  std::string key;
  const json* v = Find(j, names, &key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean())
    throw Error(Cat(src, ": key '", key, "' must be true or false, got ", v->dump()));
  return v->get<bool>();
}

double Number(const json& j, std::initializer_list<const char*> names, const std::string& src,
              double fallback, double max) {
  std::string key;
  const json* v = Find(j, names, &key);
  if (v == nullptr) return fallback;
  if (!v->is_number() || !(v->get<double>() > 0) || !(v->get<double>() <= max))
    throw Error(Cat(src, ": key '", key, "' must be a number in (0, ", max, "], got ", v->dump()));
  return v->get<double>();
}

}  // namespace wc::config_keys
