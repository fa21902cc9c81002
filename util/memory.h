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

// Makes glibc's malloc keep what a forward pass frees for the next one: blocks up to 32 MiB come
// from the heap rather than fresh mappings, and the heap's free top is not returned to the system.
// A layer's activations ([tokens, hidden] and [tokens, ffn] f32: 9 MiB each at 512 tokens of a
// hidden of 4544) are allocated and freed on every layer of every step; by default each became a
// fresh mapping whose pages faulted in, were zeroed by the kernel and unmapped again, a fifth of a
// prefill pass (docs/performance.md, "Freed activations kept"). The process then holds its
// largest step's activations from that step on. Called once, first thing in main.
void KeepFreedHeapMemory();

}  // namespace wc
