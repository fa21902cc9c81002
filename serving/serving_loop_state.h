// The serving loop's private state (serving_loop.cpp, serving_loop_step.cpp): a request before
// admission, a request in its user row, a session, a user row. Only the loop's thread touches it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "serving/serving_loop.h"
#include "serving/text_stream.h"

namespace wc {

// Streams a request's final text to its observer.
class ObserverSink : public TextSink {
 public:
  explicit ObserverSink(RequestObserver& observer) : observer_(observer) {}
  void Write(std::string_view text) override {
    if (!text.empty()) observer_.OnText(text);
  }

 private:
  RequestObserver& observer_;
};

struct ServingLoop::Pending {
  RequestId id = 0;
  Request req;
  std::vector<int> ids;  // one-shot: the framed prompt; sessions: framed at admission
  std::string error;     // non-empty: the request is bad and ends at the next step
  double t_submit = 0;
};

struct ServingLoop::Running {
  RequestId id = 0;
  Request req;
  std::unique_ptr<Sampler> own_sampler;  // one-shot requests
  Sampler* sampler = nullptr;            // own_sampler or the session's
  std::unique_ptr<ObserverSink> sink;
  std::unique_ptr<TextStream> stream;
  std::vector<int> to_feed;  // tokens not yet in the KV: the prompt, then each sampled token
  size_t fed = 0;            // of to_feed
  bool decoding = false;     // to_feed holds a sampled token (not the prompt)
  int64_t admit_seq = 0;
  RequestResult result;
};

struct ServingLoop::Session {
  int row = -1;                      // the user row it holds, once admitted
  std::unique_ptr<Sampler> sampler;  // its RNG stream, from the first turn's seed
  std::vector<int> pending;          // tokens of the conversation not fed yet
  bool had_turn = false;
  bool busy = false;  // a request of this session is running
};

struct ServingLoop::Row {
  std::unique_ptr<Running> run;
  SessionId session = 0;    // held by this session (also between its requests)
  int cur_pos = 0;          // tokens in the row's KV
  int reserved_blocks = 0;  // paged: blocks admission promised this row
};

}  // namespace wc
