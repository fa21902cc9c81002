#include "app/bench/bounds.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include "util/error.h"
#include "util/page_buffer.h"

namespace wc {

namespace {
constexpr int64_t kStreamBlock = (1 << 20) / 8;  // uint64 values per streamed block (1 MiB)
}

double StreamReadSeconds(const PageBuffer& buf, uint64_t* sink) {
  const int64_t n = static_cast<int64_t>(buf.size() / 8);
  const auto* p = reinterpret_cast<const uint64_t*>(buf.data());
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t sum = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : sum)
  for (int64_t b = 0; b < n; b += kStreamBlock)
    for (int64_t i = b; i < std::min(n, b + kStreamBlock); ++i) sum += p[i];
  const auto t1 = std::chrono::steady_clock::now();
  *sink += sum;
  return std::chrono::duration<double>(t1 - t0).count();
}

double MeasureReadBandwidth(size_t bytes, int repeats) {
  PageBuffer buf(bytes / 64 * 64);
  auto* words = reinterpret_cast<uint64_t*>(buf.data());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < static_cast<int64_t>(buf.size() / 8); ++i)
    words[i] = static_cast<uint64_t>(i);
  uint64_t sink = 0;
  StreamReadSeconds(buf, &sink);
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) best = std::min(best, StreamReadSeconds(buf, &sink));
  volatile uint64_t keep = sink;  // the sums must be computed
  (void)keep;
  return static_cast<double>(buf.size()) / best;
}

int64_t PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

int BenchThreads(int threads) {
  return threads > 0 ? threads : omp_get_max_threads();
}

}  // namespace wc
