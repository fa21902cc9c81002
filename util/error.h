// Two tiers of errors (STYLE.md §5):
//  - wc::Error: a user-facing problem (a file, a config key, an argument). Its message names the
//    file/field and says what is wrong or what to change. Caught at the top (app/main.cpp), printed
//    as one line, non-zero exit.
//  - WC_CHECK: an internal invariant. Throws wc::InternalError carrying file:line.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace wc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

// Concatenates any streamable arguments: Cat("layer ", i, ": bad shape").
template <typename... Args>
std::string Cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

[[noreturn]] void ThrowInternal(const char* file, int line, const char* cond,
                                const std::string& msg);

}  // namespace wc

#define WC_CHECK(cond, ...)                                                              \
  do {                                                                                   \
    if (!(cond)) ::wc::ThrowInternal(__FILE__, __LINE__, #cond, ::wc::Cat(__VA_ARGS__)); \
  } while (0)
