#include "kernels/gemm/gemm_group.h"

#include <algorithm>

#include "kernels/gemm/gemm_schedule.h"
#include "util/error.h"

namespace wc {

GemmGroup::GemmGroup(const float* x, int64_t n_tokens, int64_t x_stride,
                     std::vector<GemmPart> parts)
    : parts_(std::move(parts)), n_tokens_(n_tokens) {
  WC_CHECK(!parts_.empty(), "a gemm group needs a part");
  cols_ = parts_[0].w->cols();
  first_panel_.push_back(0);
  for (const GemmPart& part : parts_) {
    WC_CHECK(part.w != nullptr && part.w->cols() == cols_, "gemm group parts of unequal cols");
    size_t i = 0;
    while (i < inputs_.size() && !inputs_[i].Serves(*part.w)) ++i;
    if (i == inputs_.size()) inputs_.push_back(PackGemmInput(x, n_tokens, x_stride, *part.w));
    input_of_.push_back(i);
    first_panel_.push_back(first_panel_.back() + part.w->panels());
  }
}

void GemmGroup::Run(int64_t pa, int64_t pb) const {
  WC_CHECK(0 <= pa && pa <= pb && pb <= panels(), "bad gemm group panel range");
  gemm::ForThreadPanels(pa, pb, [&](int64_t a, int64_t b) {
    // This thread's panels, part by part; each Gemm runs on this thread (inside the region).
    for (size_t i = 0; i < parts_.size(); ++i) {
      const int64_t lo = std::max(a, first_panel_[i]), hi = std::min(b, first_panel_[i + 1]);
      if (lo >= hi) continue;
      const GemmPart& p = parts_[i];
      const int64_t rows = p.w->rows(), panel = PackedMatrix::kPanelRows;
      const int64_t r0 = (lo - first_panel_[i]) * panel;
      const int64_t r1 = std::min(rows, (hi - first_panel_[i]) * panel);
      Gemm(inputs_[input_of_[i]], *p.w, p.bias, p.y + r0, rows, r0, r1);
    }
  });
}

}  // namespace wc
