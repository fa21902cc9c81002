// A TextSink that streams to stdout, flushing after each write so text appears as it is generated.
#pragma once

#include <cstdio>

#include "serving/text_stream.h"

namespace wc {

class StdoutSink : public TextSink {
 public:
  void Write(std::string_view text) override {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  void Flush() override { std::fflush(stdout); }
};

}  // namespace wc
