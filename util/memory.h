// Sizes before allocations: the memory the machine has free, overflow-checked size arithmetic,
// and byte counts written for people. Every large allocation (KV cache, a random checkpoint) is
// computed with these and checked against AvailableMemoryBytes() first, so a bad flag gets a
// clear error instead of minutes of paging and an out-of-memory kill.
#pragma once

#include <cstdint>
#include <string>

namespace wc {

// MemAvailable from /proc/meminfo (what can be allocated without swapping), in bytes; where that
// is unknown, physical pages times page size.
int64_t AvailableMemoryBytes();

// a * b, a + b for non-negative sizes; throw wc::Error("<what> overflows ...") when the result
// does not fit in int64_t.
int64_t CheckedMul(int64_t a, int64_t b, const char* what);
int64_t CheckedAdd(int64_t a, int64_t b, const char* what);

// "512 B", "3.0 KiB", "7.5 GiB", "1.2 TiB", "9.0 EiB".
std::string FormatByteSize(int64_t bytes);

// Throws wc::Error when `bytes` is more than AvailableMemoryBytes(): "<what> needs 7.5 GiB
// (8053063680 bytes) but 3.1 GiB are available; <advice>".
void CheckFitsInMemory(int64_t bytes, const std::string& what, const std::string& advice);

}  // namespace wc
