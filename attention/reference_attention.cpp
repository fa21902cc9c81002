#include "attention/reference_attention.h"

#include <cstring>

#include "kernels/ops.h"
#include "util/error.h"

namespace wc {

void AccumulateRow(float a, const MatrixRef& m, int64_t row, float* out) {
  if (m.dtype == DType::kBF16) {
    AxpyBF16(a, static_cast<const uint16_t*>(m.data) + row * m.row_stride, out, m.cols);
  } else {
    WC_CHECK(m.dtype == DType::kF32, "unsupported view dtype");
    const float* v = static_cast<const float*>(m.data) + row * m.row_stride;
    for (int64_t d = 0; d < m.cols; ++d) out[d] += a * v[d];
  }
}

void ReferenceAttentionGroup(const float* q, int n_qh, const MatrixRef& keys,
                             const MatrixRef& values, float scale, float* scores, float* out,
                             const AlibiBias& alibi, int head0) {
  const int64_t kv_len = keys.rows, head_dim = keys.cols;
  WC_CHECK(kv_len >= 1 && values.rows == kv_len && values.cols == head_dim, "bad K/V views");
  // scores[h, p] = q[h] . k[p]
  MatMulSerial(q, n_qh, head_dim, keys, nullptr, scores, kv_len, 0, kv_len);
  for (int h = 0; h < n_qh; ++h) {
    float* s = scores + h * kv_len;
    if (alibi.enabled())
      for (int64_t p = 0; p < kv_len; ++p) s[p] += alibi.At(head0 + h, p);
    for (int64_t p = 0; p < kv_len; ++p) s[p] *= scale;
    Softmax(s, kv_len);
    float* o = out + h * head_dim;
    std::memset(o, 0, static_cast<size_t>(head_dim) * sizeof(float));
    for (int64_t p = 0; p < kv_len; ++p) AccumulateRow(s[p], values, p, o);
  }
}

}  // namespace wc
