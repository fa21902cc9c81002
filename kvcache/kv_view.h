// How attention engines read K and V: [len, head_dim] row views of one (batch entry, KV head),
// whatever the cache's layout. Attention knows this interface, never a model or a cache class.
#pragma once

#include "kernels/matmul.h"

namespace wc {

class KVView {
 public:
  virtual ~KVView() = default;
  // Rows [start, start + len) of K (or V) for (batch, kv_head) as an in-place [len, head_dim]
  // view, or an empty MatrixRef (data == nullptr) when the storage cannot be read in place
  // (pages, quantized rows): then use Gather.
  virtual MatrixRef Keys(int batch, int kv_head, int start, int len) const = 0;
  virtual MatrixRef Values(int batch, int kv_head, int start, int len) const = 0;
  // Copies or decodes those rows into k_out / v_out: [len, head_dim] of GatherDType(). Views that
  // always read in place need not support it.
  virtual void Gather(int, int, int, int, void*, void*) const {}
  virtual DType GatherDType() const { return DType::kF32; }
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
  MatrixRef Keys(int b, int h, int start, int len) const override {
    return View(k_, b, h, start, len);
  }
  MatrixRef Values(int b, int h, int start, int len) const override {
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
  MatrixRef Keys(int, int, int, int) const override { return {}; }
  MatrixRef Values(int, int, int, int) const override { return {}; }
  double RowBytes() const override { return row_bytes_; }
  int head_dim() const override { return head_dim_; }

 private:
  double row_bytes_;
  int head_dim_;
};

}  // namespace wc
