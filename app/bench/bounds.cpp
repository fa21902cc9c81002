#include "app/bench/bounds.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "model/weights.h"
#include "util/error.h"
#include "util/page_buffer.h"

namespace wc {

namespace {
constexpr int64_t kStreamBlock = (1 << 20) / 8;  // uint64 values per streamed block (1 MiB)
constexpr int64_t kLine = 64;                    // bytes a probe load reads (one cache line)
constexpr int64_t kTilePanels = 4;               // panels a 1-row GEMM tile streams at once

using Line = uint64_t __attribute__((vector_size(kLine)));  // one cache line of words

// Panels [pa, pb) of m, kTilePanels at a time, a line of each in turn; returns their word sum.
// Compiled for AVX-512 where present (64-byte loads, as the kernels' own), else the baseline.
__attribute__((target_clones("avx512f", "default"))) uint64_t ReadPanels(const StreamedMatrix& m,
                                                                         int64_t pa, int64_t pb) {
  Line acc[kTilePanels] = {};
  for (int64_t q = pa; q < pb; q += kTilePanels) {
    const int64_t np = std::min(kTilePanels, pb - q);
    const uint8_t* base = m.data + q * m.panel_bytes;
    if (np == kTilePanels) {  // the common case, unrolled: 4 streams, one line of each
      for (int64_t off = 0; off < m.panel_bytes; off += kLine) {
        for (int64_t j = 0; j < kTilePanels; ++j) {
          Line v;
          std::memcpy(&v, base + j * m.panel_bytes + off, kLine);
          acc[j] += v;
        }
      }
    } else {
      for (int64_t off = 0; off < m.panel_bytes; off += kLine) {
        for (int64_t j = 0; j < np; ++j) {
          Line v;
          std::memcpy(&v, base + j * m.panel_bytes + off, kLine);
          acc[j] += v;
        }
      }
    }
  }
  uint64_t sum = 0;
  for (const Line& a : acc)
    for (int i = 0; i < kLine / 8; ++i) sum += a[i];
  return sum;
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The value in kB of `key` in a /proc "Key: value kB" file, in bytes; -1 where absent.
int64_t ProcKb(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  while (in >> k) {
    if (k == key) {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

}  // namespace

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

std::vector<StreamedMatrix> DecodeWeightStreams(const ModelWeights& w) {
  std::vector<StreamedMatrix> out;
  auto add = [&](const PackedMatrix& m) {
    if (m.empty()) return;
    if (IsBfp(m.format())) {
      out.push_back({m.bfp().data(), m.bfp().panels(), m.bfp().panel_bytes()});
    } else if (IsGgmlQuant(m.format())) {
      // GGML groups lie back to back: read as 4 KiB pieces (the last partial one left out).
      const int64_t bytes = static_cast<int64_t>(m.quant().bytes());
      out.push_back({m.quant().group(0), bytes / 4096, 4096});
    } else {
      out.push_back({static_cast<const uint8_t*>(m.data()), m.panels(),
                     m.panel_elems() * static_cast<int64_t>(DTypeSize(m.dtype()))});
    }
  };
  for (const LayerWeights& l : w.layers)
    for (const Linear* m : l.Linears()) add(m->p);
  add(w.lm_head_p);
  return out;
}

DecodeReadProbe::DecodeReadProbe(std::vector<StreamedMatrix> matrices, int threads)
    : matrices_(std::move(matrices)), threads_(std::max(1, threads)) {
  for (const StreamedMatrix& m : matrices_) {
    WC_CHECK(m.panel_bytes % kLine == 0 && m.panels >= 0, "probe: panels of whole cache lines");
    bytes_ += m.bytes();
  }
}

double DecodeReadProbe::Pass() {
  uint64_t sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const StreamedMatrix& m : matrices_) {
#pragma omp parallel num_threads(threads_) reduction(+ : sum)
    {
      const int64_t nth = omp_get_num_threads(), tid = omp_get_thread_num();
      sum += ReadPanels(m, m.panels * tid / nth, m.panels * (tid + 1) / nth);
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  checksum_ = sum;
  ++passes_;
  const double rate = s > 0 ? static_cast<double>(bytes_) / s : 0;
  best_ = std::max(best_, rate);
  return rate;
}

std::string DecodeReadProbe::Describe() const {
  const std::string thp = TransparentHugePages();
  const int64_t huge = AnonHugePageBytes();
  return Cat("best of ", passes_, " passes over the packed weights as decode streams them (",
             Fixed(static_cast<double>(bytes_) / 1048576.0, 1), " MiB, ", matrices_.size(),
             " matrices, ", threads_,
             " threads, 4 panels a thread at a time, no software "
             "prefetch; 2 MiB-aligned buffers, transparent huge pages ",
             thp.empty() ? "unknown" : thp,
             huge >= 0 ? Cat(", ", Fixed(static_cast<double>(huge) / 1048576.0, 0),
                             " MiB of this process in huge pages")
                       : std::string(),
             "), one before and one after each measured decode run");
}

uint64_t WordSum(const uint8_t* data, int64_t bytes) {
  uint64_t sum = 0;
  for (int64_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t v;
    std::memcpy(&v, data + i, 8);
    sum += v;
  }
  return sum;
}

std::string TransparentHugePages() {
  // "always [madvise] never": the bracketed word is the setting.
  const std::string line = ReadFirstLine("/sys/kernel/mm/transparent_hugepage/enabled");
  const size_t a = line.find('['), b = line.find(']');
  return a != std::string::npos && b != std::string::npos && b > a ? line.substr(a + 1, b - a - 1)
                                                                   : "";
}

int64_t AnonHugePageBytes() {
  return ProcKb("/proc/self/smaps_rollup", "AnonHugePages:");
}

int64_t PeakRssBytes() {
  return std::max<int64_t>(0, ProcKb("/proc/self/status", "VmHWM:"));
}

int64_t RssBytes() {
  return std::max<int64_t>(0, ProcKb("/proc/self/status", "VmRSS:"));
}

int BenchThreads(int threads) {
  return threads > 0 ? threads : omp_get_max_threads();
}

}  // namespace wc
