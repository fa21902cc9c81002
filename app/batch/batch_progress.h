// `wormchat batch` progress on stderr: on a terminal one line redrawn in place (done/total,
// tokens/s, ETA, active rows); otherwise a plain line every few seconds and a summary at the end,
// so logs stay readable. Silent when disabled (--quiet).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "serving/serving_loop.h"

namespace wc {

// Speculative decoding over a batch (RequestResult::spec_proposed / spec_accepted, summed).
struct BatchSpeculation {
  int64_t proposed = 0, accepted = 0;
};

class BatchProgress {
 public:
  // `total` requests in the input, `already` of them done by an earlier run. `tty`: redraw in
  // place, else plain lines every `plain_every_s` seconds.
  BatchProgress(bool enabled, bool tty, int total, int already, double plain_every_s = 5.0);

  // Prints a line as it is (e.g. what the run is about to do), above the live bar on a terminal.
  void Note(const std::string& line);
  // `done` requests in all (failed ones included), `failed` of them; `status` from the loop. Call
  // it a few times a second: it redraws on a terminal and prints only when due otherwise.
  void Update(int done, int failed, const ServingStatus& status);
  // The last lines: the prompt tokens prefilled and those the prefix cache gave; with `speculation`
  // (non-null: --speculate on) the proposed tokens accepted; then what was done and how fast
  // (`interrupted`: stopped by a signal).
  void Finish(int done, int failed, const ServingStatus& status, bool interrupted,
              const BatchSpeculation* speculation = nullptr);

 private:
  std::string Line(int done, int failed, const ServingStatus& status) const;
  double Elapsed() const;

  bool enabled_, tty_;
  int total_, already_;
  double plain_every_s_;
  std::chrono::steady_clock::time_point t0_;
  double last_plain_s_ = 0;
  bool bar_drawn_ = false;  // a live bar is on the terminal's current line
};

}  // namespace wc
