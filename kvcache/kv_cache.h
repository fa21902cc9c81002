// The KV cache: per layer, K and V laid out contiguously as
//   [user_rows, n_kv_heads, max_seq, head_dim]   (the seed-001 layout)
// in bf16 (default) or f32. Tokens are converted once, when written; readers get row views.
// The KV-cache issue extends this with quantized formats and paged blocks behind the same calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kvcache/kv_view.h"

namespace wc {

enum class KVDType : uint8_t { kBF16, kF32 };

// Parses "bf16" / "f32". Throws wc::Error naming --kv-dtype on anything else.
KVDType ParseKVDType(const std::string& name);
const char* KVDTypeName(KVDType dtype);
int KVDTypeBytes(KVDType dtype);

struct KVCacheShape {
  int n_layers = 0;
  int user_rows = 0;
  int n_kv_heads = 0;
  int max_seq = 0;
  int head_dim = 0;
};

// Bytes of K plus V for one token of one user across all layers.
int64_t KVBytesPerToken(const KVCacheShape& shape, KVDType dtype);
// Bytes of K (or of V) for one layer, all users and positions.
int64_t KVBytesPerLayerK(const KVCacheShape& shape, KVDType dtype);

class KVCache {
 public:
  // Allocates (zeroed) storage for every layer. Throws wc::Error if the size is absurd.
  KVCache(const KVCacheShape& shape, KVDType dtype);

  const KVCacheShape& shape() const { return shape_; }
  KVDType dtype() const { return dtype_; }

  // Stores one token's keys and values for `user` at `pos` of `layer`.
  //   k, v: [n_kv_heads, head_dim] f32
  // Throws wc::Error if pos is outside [0, max_seq) ("KV cache full").
  void Write(int layer, int user, int pos, const float* k, const float* v);

  // Views of cached rows [start, start + len) of one KV head: [len, head_dim], stored dtype.
  MatrixRef Keys(int layer, int user, int kv_head, int start, int len) const;
  MatrixRef Values(int layer, int user, int kv_head, int start, int len) const;
  // Bytes of one stored K (or V) row.
  double RowBytes() const { return static_cast<double>(shape_.head_dim) * KVDTypeBytes(dtype_); }

 private:
  int64_t Offset(int user, int kv_head, int pos) const;

  KVCacheShape shape_;
  KVDType dtype_;
  // Per layer: [user_rows, n_kv_heads, max_seq, head_dim] elements of dtype_, as raw bytes.
  std::vector<std::vector<uint8_t>> k_;
  std::vector<std::vector<uint8_t>> v_;
};

// One layer of a KVCache seen by an attention engine: batch entry b reads user row users[b],
// shifted by offsets[b] rows (0 for the cache part; the token's own position for the seed-001 "new
// token" part). The arrays must outlive the view.
class KVCacheLayerView : public KVView {
 public:
  KVCacheLayerView(const KVCache& cache, int layer, const int32_t* users, const int32_t* offsets)
      : cache_(cache), layer_(layer), users_(users), offsets_(offsets) {}
  MatrixRef Keys(int b, int h, int start, int len) const override {
    return cache_.Keys(layer_, users_[b], h, offsets_[b] + start, len);
  }
  MatrixRef Values(int b, int h, int start, int len) const override {
    return cache_.Values(layer_, users_[b], h, offsets_[b] + start, len);
  }
  double RowBytes() const override { return cache_.RowBytes(); }
  int head_dim() const override { return cache_.shape().head_dim; }

 private:
  const KVCache& cache_;
  int layer_;
  const int32_t* users_;
  const int32_t* offsets_;
};

}  // namespace wc
