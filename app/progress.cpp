#include "app/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "util/memory.h"

namespace wc {
namespace {

constexpr double kQuietS = 1.0;  // nothing is drawn for runs shorter than this

}  // namespace

std::string MiBList(const std::vector<int64_t>& bytes) {
  std::string s;
  char buf[32];
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.1f", i == 0 ? "" : ", ", bytes[i] / 1048576.0);
    s += buf;
  }
  return s;
}

std::string ClockText(double seconds) {
  const long t = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

Progress::Progress(std::string label, int64_t total, std::string unit)
    : Progress(std::move(label), total, std::move(unit), isatty(STDERR_FILENO) != 0, 5.0) {}

Progress::Progress(std::string label, int64_t total, std::string unit, bool tty, double every_s)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(std::max<int64_t>(total, 1)),
      tty_(tty),
      every_s_(every_s),
      t0_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  Finish();
}

double Progress::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

std::string Progress::Line(int64_t done, double elapsed_s) const {
  done = std::clamp<int64_t>(done, 0, total_);
  constexpr int kWidth = 20;
  const int filled = static_cast<int>(kWidth * done / total_);
  const std::string bar = std::string(static_cast<size_t>(filled), '#') +
                          std::string(static_cast<size_t>(kWidth - filled), '.');
  const double rate = elapsed_s > 0 ? done / elapsed_s : 0;
  const std::string eta = done > 0 ? ClockText(elapsed_s / done * (total_ - done)) : "--:--";
  char per_s[32];
  std::snprintf(per_s, sizeof per_s, rate >= 10 ? "%.0f" : "%.2g", rate);
  const bool bytes = unit_ == "bytes";
  const std::string amount =
      bytes ? FormatByteSize(done) + " of " + FormatByteSize(total_)
            : std::to_string(done) + "/" + std::to_string(total_) + " " + unit_;
  const std::string speed = bytes ? FormatByteSize(static_cast<int64_t>(rate)) + "/s"
                                  : std::string(per_s) + " " + unit_ + "/s";
  return label_ + " [" + bar + "] " + amount + "  " + speed + "  ETA " + eta;
}

void Progress::Update(int64_t done) {
  const double now = Elapsed();
  if (now < kQuietS) return;
  if (now - last_draw_s_ < (tty_ ? 0.1 : every_s_)) return;
  last_draw_s_ = now;
  if (tty_) {
    std::fprintf(stderr, "\r%s\x1b[K", Line(done, now).c_str());
    drawn_ = true;
  } else {
    std::fprintf(stderr, "%s\n", Line(done, now).c_str());
  }
  std::fflush(stderr);
}

void Progress::Finish() {
  if (!drawn_) return;
  std::fputs("\r\x1b[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace wc
