#include "util/memory.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "util/error.h"

namespace wc {

int64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : INT64_MAX;
}

int64_t CheckedMul(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    throw Error(Cat(what, " overflows: ", a, " x ", b));
  return r;
}

int64_t CheckedAdd(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r))
    throw Error(Cat(what, " overflows: ", a, " + ", b));
  return r;
}

std::string FormatByteSize(int64_t bytes) {
  if (bytes < 1024) return Cat(bytes, " B");
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[unit]);
  return buf;
}

void CheckFitsInMemory(int64_t bytes, const std::string& what, const std::string& advice) {
  const int64_t available = AvailableMemoryBytes();
  if (bytes <= available) return;
  throw Error(Cat(what, " needs ", FormatByteSize(bytes), " (", bytes, " bytes) but ",
                  FormatByteSize(available), " are available; ", advice));
}

void KeepFreedHeapMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

}  // namespace wc
