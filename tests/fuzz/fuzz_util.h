// Shared by the libFuzzer harnesses: what a parser may do with a bad input is throw wc::Error with
// a one-line message naming the file. Anything else (another exception, a crash, a sanitizer
// report, a message on two lines or without the file) stops the fuzzer.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "util/error.h"

namespace wc::fuzz {

// Aborts (a finding) if `e` does not read as the project's errors must.
inline void CheckError(const Error& e, const std::string& file) {
  const char* msg = e.what();
  if (std::strchr(msg, '\n') != nullptr ||
      (!file.empty() && std::strstr(msg, file.c_str()) == nullptr)) {
    std::fprintf(stderr, "error message must be one line naming '%s', got: %s\n", file.c_str(),
                 msg);
    std::abort();
  }
}

// Aborts with `what` when `ok` is false (a broken property of a successful parse).
inline void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace wc::fuzz
