// How attention engines read K and V: [len, head_dim] row views of one (batch entry, KV head),
// whatever the cache's layout. Attention knows this interface, never a model or a cache class.
#pragma once

#include <cstdint>
#include <utility>

#include "kernels/attention/kv_rows.h"
#include "util/error.h"

namespace wc {

class KVView {
 public:
  virtual ~KVView() = default;
  // Rows [start, start + len) of K (or V) for (batch, kv_head), in place and in their stored
  // format, or an empty RowsRef when they are not one strided run of memory (they span pages):
  // then use CopyRows.
  virtual RowsRef Keys(int batch, int kv_head, int start, int len) const = 0;
  virtual RowsRef Values(int batch, int kv_head, int start, int len) const = 0;
  // Copies those rows as stored - no decoding - into k_buf / v_buf (len * RowBytes() bytes each)
  // and returns views of the copies. Views whose rows are always in place need not support it.
  virtual std::pair<RowsRef, RowsRef> CopyRows(int, int, int, int, uint8_t*, uint8_t*) const {
    WC_CHECK(false, "this KV view reads every row in place");
    return {};
  }
  // Bytes one K (or V) row occupies in its stored format: what a DRAM read of it moves.
  virtual double RowBytes() const = 0;
  virtual int head_dim() const = 0;
};

// K and V held in caller arrays [bsz, n_kv_heads, kv_len, head_dim] (f32 or bf16).
class ContiguousKV : public KVView {
 public:
  ContiguousKV(DType dtype, const void* k, const void* v, int n_kv_heads, int kv_len, int head_dim)
      : dtype_(dtype),
        k_(k),
        v_(v),
        n_kv_heads_(n_kv_heads),
        kv_len_(kv_len),
        head_dim_(head_dim) {}
  RowsRef Keys(int b, int h, int start, int len) const override {
    return View(k_, b, h, start, len);
  }
  RowsRef Values(int b, int h, int start, int len) const override {
    return View(v_, b, h, start, len);
  }
  double RowBytes() const override { return static_cast<double>(head_dim_) * DTypeSize(dtype_); }
  int head_dim() const override { return head_dim_; }

 private:
  MatrixRef View(const void* base, int b, int h, int start, int len) const {
    const int64_t row = (static_cast<int64_t>(b) * n_kv_heads_ + h) * kv_len_ + start;
    return MatrixRef{dtype_, len, head_dim_, head_dim_,
                     static_cast<const uint8_t*>(base) + row * head_dim_ * DTypeSize(dtype_)};
  }
  DType dtype_;
  const void* k_;
  const void* v_;
  int n_kv_heads_, kv_len_, head_dim_;
};

// A view with no data: for planning and performance runs where only byte counts matter.
class ShapeOnlyKV : public KVView {
 public:
  ShapeOnlyKV(double row_bytes, int head_dim) : row_bytes_(row_bytes), head_dim_(head_dim) {}
  RowsRef Keys(int, int, int, int) const override { return {}; }
  RowsRef Values(int, int, int, int) const override { return {}; }
  double RowBytes() const override { return row_bytes_; }
  int head_dim() const override { return head_dim_; }

 private:
  double row_bytes_;
  int head_dim_;
};

}  // namespace wc
