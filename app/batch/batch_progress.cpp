#include "app/batch/batch_progress.h"

#include <algorithm>
#include <cstdio>

#include "app/progress.h"
#include "util/error.h"

namespace wc {

BatchProgress::BatchProgress(bool enabled, bool tty, int total, int already, double plain_every_s)
    : enabled_(enabled),
      tty_(tty),
      total_(total),
      already_(already),
      plain_every_s_(plain_every_s),
      t0_(std::chrono::steady_clock::now()) {}

double BatchProgress::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

std::string BatchProgress::Line(int done, int failed, const ServingStatus& s) const {
  const double elapsed = Elapsed();
  const int this_run = done - already_;
  const std::string eta =
      this_run > 0 ? ClockText(elapsed / this_run * (total_ - done)) : std::string("--:--");
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "batch: %d/%d done (%d failed), %.1f tok/s, ETA %s, %d/%d rows active, %d queued",
                done, total_, failed, s.tokens_per_s, eta.c_str(), s.active_rows, s.user_rows,
                s.queued);
  return buf;
}

void BatchProgress::Note(const std::string& line) {
  if (!enabled_) return;
  if (bar_drawn_) std::fputs("\r\x1b[K", stderr);
  bar_drawn_ = false;
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void BatchProgress::Update(int done, int failed, const ServingStatus& status) {
  if (!enabled_) return;
  if (tty_) {
    std::fprintf(stderr, "\r%s\x1b[K", Line(done, failed, status).c_str());
    bar_drawn_ = true;
  } else {
    const double now = Elapsed();
    if (now - last_plain_s_ < plain_every_s_) return;
    last_plain_s_ = now;
    std::fprintf(stderr, "%s\n", Line(done, failed, status).c_str());
  }
  std::fflush(stderr);
}

void BatchProgress::Finish(int done, int failed, const ServingStatus& status, bool interrupted,
                           const BatchSpeculation* speculation) {
  if (!enabled_) return;
  const double elapsed = Elapsed();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f s", elapsed);
  // What the prefix cache saved, before the last line: the prompt tokens computed, and those
  // taken instead (from memory, or mapped in from --prefix-cache-dir's files).
  Note(Cat("batch: ", status.tokens_prefilled, " prompt tokens prefilled, ",
           status.prefix_cached_tokens, " taken from the prefix cache (", status.prefix_hits,
           status.prefix_hits == 1 ? " hit" : " hits",
           status.prefix_disk_loaded > 0 || status.prefix_disk_saved > 0
               ? Cat("; ", status.prefix_disk_loaded, " blocks mapped in from files, ",
                     status.prefix_disk_saved, " files written")
               : std::string(),
           ")"));
  if (speculation != nullptr) {
    const double share =
        speculation->proposed > 0 ? 100.0 * speculation->accepted / speculation->proposed : 0.0;
    char pct[16];
    std::snprintf(pct, sizeof pct, "%.1f%%", share);
    Note(Cat("batch: speculation: ", speculation->accepted, "/", speculation->proposed,
             " proposed tokens accepted (", pct, ")"));
  }
  Note(Cat("batch: ", interrupted ? "interrupted: " : "", done, "/", total_, " done (", failed,
           " failed, ", already_, " from an earlier run); ", status.tokens_sampled,
           " tokens sampled in ", elapsed < 60 ? std::string(took) : ClockText(elapsed), " (",
           static_cast<long>(status.tokens_sampled / std::max(elapsed, 1e-9)), " tok/s)"));
}

}  // namespace wc
