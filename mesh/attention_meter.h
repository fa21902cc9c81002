// The emulated mesh's figures of a model's attention as it runs: a FlashDecodeObserver
// (model/flash_decode_observer.h) that adds up each FlashDecode op's bytes, cores and the device
// time the performance model (mesh/perf_model.h) gives it, and keeps a copy of the last op for the
// chat's core-grid panel. The front end installs one with DecoderModel::set_flash_decode_observer.
#pragma once

#include <cstdint>
#include <mutex>

#include "model/flash_decode_observer.h"

namespace wc {

// What the emulated mesh did for the attention of the forward passes so far.
struct AttentionTotals {
  int64_t ops = 0;        // engine runs (one per layer per Forward)
  double dram_bytes = 0;  // K/V bytes read, stored format
  double noc_bytes = 0;   // partials moved between cores
  int64_t max_cores_used = 0;
  double emulated_us = 0;  // device time the performance model gives these ops on the mesh
};

// The last attention op the emulated mesh ran (the chat's core-grid panel): which cores worked on
// what, and the stored K/V row size their DRAM bytes count.
struct LastAttention {
  bool valid = false;  // false before the first FlashDecode op (or with the reference attention)
  int layer = 0;
  int bsz = 0;     // users (user rows) in the op
  int tokens = 0;  // query positions in the op (several per user for a verify or prompt chunk)
  OpTrace trace;
  double kv_row_bytes = 0;
};

class AttentionMeter final : public FlashDecodeObserver {
 public:
  void OnFlashDecode(const FlashDecodeRun& run) override;
  // Copies of the figures since construction; safe from any thread while Forward runs.
  AttentionTotals totals() const;
  LastAttention last() const;

 private:
  mutable std::mutex mu_;
  AttentionTotals totals_;  // under mu_
  LastAttention last_;      // under mu_
};

}  // namespace wc
