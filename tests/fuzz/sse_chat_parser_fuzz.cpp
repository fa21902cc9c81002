// A streamed chat reply's body as `wormchat chat --server` reads it from any OpenAI-compatible
// server (app/openai/chat_client.h's SseChatParser), and an error answer's body (HttpErrorText).
// The input is fed whole, a byte at a time, and in pieces whose sizes its own bytes choose: every
// way must give the same reply (text, deltas, finish_reason, usage, figures, error) and the same
// text heard by the callback; an error is one line. Anything else (a crash, an exception, a
// sanitizer report, a difference) is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "app/openai/chat_client.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

struct Outcome {
  wc::ChatReply reply;
  std::string heard;
  int figures = 0;
  bool done = false;
};

// Feeds `in` in pieces of the sizes `sizes` gives in turn (cycled; the rest whole), then Finish.
Outcome Run(std::string_view in, const std::vector<size_t>& sizes) {
  Outcome o;
  wc::SseChatParser p([&o](std::string_view d) { o.heard += d; },
                      [&o](const wc::ServerFigures&) { ++o.figures; });
  size_t i = 0;
  while (!in.empty()) {
    const size_t n = sizes.empty() ? in.size() : std::min(in.size(), sizes[i++ % sizes.size()]);
    const bool more = p.Feed(in.substr(0, n));
    wc::fuzz::Require(more == (!p.done() && p.error().empty()), "Feed's answer is the state's");
    in.remove_prefix(n);
    if (!more) break;
  }
  p.Finish();
  p.Finish();  // idempotent
  o.reply = p.reply();
  o.done = p.done();
  return o;
}

bool Same(const Outcome& a, const Outcome& b) {
  const wc::ChatReply& x = a.reply;
  const wc::ChatReply& y = b.reply;
  const wc::ServerFigures& f = x.figures;
  const wc::ServerFigures& g = y.figures;
  return a.heard == b.heard && a.figures == b.figures && a.done == b.done && x.text == y.text &&
         x.finish_reason == y.finish_reason && x.error == y.error && x.deltas == y.deltas &&
         x.prompt_tokens == y.prompt_tokens && x.completion_tokens == y.completion_tokens &&
         x.cached_tokens == y.cached_tokens && f.present == g.present &&
         f.kv_blocks_used == g.kv_blocks_used && f.kv_bytes_total == g.kv_bytes_total &&
         f.kv_format == g.kv_format && f.mesh == g.mesh && f.ctx_size == g.ctx_size &&
         f.model_us_estimated == g.model_us_estimated && f.mesh_us_per_token == g.mesh_us_per_token;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const Outcome whole = Run(in, {});
  wc::fuzz::Require(whole.heard == whole.reply.text, "the callback hears the reply's text");
  wc::fuzz::Require(whole.done != !whole.reply.error.empty(), "done or an error, once finished");
  wc::fuzz::Require(whole.reply.error.find('\n') == std::string::npos, "one-line errors");
  wc::fuzz::Require(whole.reply.figures.present == (whole.figures > 0),
                    "figures present when heard");

  wc::fuzz::Require(Same(whole, Run(in, {1})), "a byte at a time gives the same reply");
  std::vector<size_t> sizes;  // from the input's bytes: 1-64 each
  for (size_t i = 0; i < size && sizes.size() < 16; i += 7)
    sizes.push_back(1 + static_cast<unsigned char>(in[i]) % 64);
  wc::fuzz::Require(Same(whole, Run(in, sizes)), "pieces of any size give the same reply");

  const std::string http = wc::HttpErrorText(500, in, in.substr(0, 20));
  wc::fuzz::Require(http.rfind("HTTP 500", 0) == 0, "an HTTP error names its status");
  wc::fuzz::Require(http.find('\n') == std::string::npos, "one-line HTTP errors");
  return 0;
}
