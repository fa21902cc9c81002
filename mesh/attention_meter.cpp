#include "mesh/attention_meter.h"

#include <algorithm>

#include "mesh/perf_model.h"

namespace wc {

void AttentionMeter::OnFlashDecode(const FlashDecodeRun& run) {
  const OpTrace& trace = run.trace;
  const double us =
      EstimateFlashDecode(trace, run.mesh, ShapeOf(run.op), run.config.fidelity).emulated_us;
  std::lock_guard<std::mutex> lock(mu_);
  ++totals_.ops;
  totals_.emulated_us += us;
  totals_.dram_bytes += trace.dram_bytes;
  totals_.noc_bytes += trace.noc_bytes;
  totals_.max_cores_used = std::max(totals_.max_cores_used, trace.cores_used);
  last_.valid = true;
  last_.layer = run.layer;
  last_.bsz = run.op.bsz;
  last_.tokens = run.op.tokens();
  last_.trace = trace;
  last_.kv_row_bytes = run.op.kv->RowBytes();
}

AttentionTotals AttentionMeter::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_;
}

LastAttention AttentionMeter::last() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

}  // namespace wc
