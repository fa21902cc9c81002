// Shared by the libFuzzer harnesses: what a parser may do with a bad input is throw wc::Error with
// a one-line message naming the file. Anything else (another exception, a crash, a sanitizer
// report, a message on two lines or without the file) stops the fuzzer.
#pragma once

#include <cstddef>
#include <cstdint>
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

// Aborts unless [p, p + n) lies inside the input [data, data + size); touches its first and last
// byte, so ASan reports any byte of it outside the input (a tensor's data a parser points at).
inline void RequireInside(const uint8_t* data, size_t size, const uint8_t* p, size_t n) {
  Require(p >= data && n <= size && p - data <= static_cast<std::ptrdiff_t>(size - n),
          "data inside the input");
  if (n > 0) Require((p[0] | p[n - 1]) >= 0, "readable");
}

}  // namespace wc::fuzz
