#include "kernels/gemm/gemm_profile.h"

#include <atomic>
#include <mutex>
#include <utility>

#include "kernels/gemm/gemm.h"
#include "util/error.h"

namespace wc {
namespace {

std::atomic<bool> recording{false};
std::mutex entries_mu;
std::vector<GemmProfileEntry> entries;  // under entries_mu

}  // namespace

GemmProfile::GemmProfile() {
  if (recording.exchange(true)) throw Error("a GEMM profile is already recording");
  std::lock_guard<std::mutex> lock(entries_mu);
  entries.clear();
}

GemmProfile::~GemmProfile() {
  recording.store(false);
  std::lock_guard<std::mutex> lock(entries_mu);
  entries.clear();
}

void GemmProfile::Clear() {
  std::lock_guard<std::mutex> lock(entries_mu);
  entries.clear();
}

std::vector<GemmProfileEntry> GemmProfile::Entries() const {
  std::lock_guard<std::mutex> lock(entries_mu);
  return entries;
}

bool GemmProfile::Recording() {
  return recording.load(std::memory_order_relaxed);
}

GemmCallTimer::GemmCallTimer(std::string matrix, const PackedMatrix& w, int64_t n_tokens,
                             double flops)
    : on_(GemmProfile::Recording()),
      matrix_(std::move(matrix)),
      w_(&w),
      n_tokens_(n_tokens),
      flops_(flops) {
  if (on_) start_ = std::chrono::steady_clock::now();
}

GemmCallTimer::~GemmCallTimer() {
  if (!on_) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const GemmKernel kernel = ChooseGemmKernel(w_->format(), w_->precision(), n_tokens_).kernel;
  std::string label = GemmKernelLabel(kernel);
  std::lock_guard<std::mutex> lock(entries_mu);
  if (!recording.load(std::memory_order_relaxed)) return;  // the profile ended during the call
  GemmProfileEntry* e = nullptr;
  for (GemmProfileEntry& x : entries)
    if (x.matrix == matrix_ && x.kernel == label) e = &x;
  if (e == nullptr) {
    entries.push_back({matrix_, std::move(label), KernelInfo(kernel).peak});
    e = &entries.back();
  }
  e->calls += 1;
  e->tokens += n_tokens_;
  e->flops += flops_;
  e->seconds += seconds;
}

}  // namespace wc
