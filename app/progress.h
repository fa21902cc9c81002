// Progress of a long-running command on stderr (perplexity, calibrate, init, mesh-bench): on a
// terminal one line redrawn in place -
//   perplexity [##########..........] 2048/4096 tokens  812 tokens/s  ETA 0:03
// - otherwise a plain line every few seconds, so logs stay readable. Runs shorter than a second
// print nothing. The line is cleared by Finish (or the destructor) before the command's output.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace wc {

// "0:42", "12:05", "1:02:03": a duration for progress lines.
std::string ClockText(double seconds);
// "19.8, 19.8": byte counts in MiB with one decimal, comma-separated (per-rank figures).
std::string MiBList(const std::vector<int64_t>& bytes);

class Progress {
 public:
  // `total` units of work named `unit` ("tokens", "bytes", "configurations"). `tty`: redraw in
  // place (default: whether stderr is a terminal); else a line every `every_s` seconds.
  Progress(std::string label, int64_t total, std::string unit);
  Progress(std::string label, int64_t total, std::string unit, bool tty, double every_s);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` of the total so far. Cheap: draws at most ten times a second.
  void Update(int64_t done);
  // Clears the live line (a terminal); idempotent.
  void Finish();

  // The line for `done` after `elapsed_s` seconds (for tests).
  std::string Line(int64_t done, double elapsed_s) const;

 private:
  double Elapsed() const;

  std::string label_, unit_;
  int64_t total_;
  bool tty_;
  double every_s_;
  std::chrono::steady_clock::time_point t0_;
  double last_draw_s_ = 0;
  bool drawn_ = false;  // a live line is on the terminal
};

}  // namespace wc
