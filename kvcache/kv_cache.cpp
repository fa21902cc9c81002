#include "kvcache/kv_cache.h"

#include <cstring>

#include "util/bf16.h"
#include "util/error.h"

namespace wc {

KVDType ParseKVDType(const std::string& name) {
  if (name == "bf16") return KVDType::kBF16;
  if (name == "f32") return KVDType::kF32;
  throw Error(Cat("--kv-dtype '", name, "' is not supported; choose bf16 or f32"));
}

const char* KVDTypeName(KVDType dtype) {
  return dtype == KVDType::kBF16 ? "bf16" : "f32";
}
int KVDTypeBytes(KVDType dtype) {
  return dtype == KVDType::kBF16 ? 2 : 4;
}

int64_t KVBytesPerToken(const KVCacheShape& s, KVDType dtype) {
  return 2LL * s.n_layers * s.n_kv_heads * s.head_dim * KVDTypeBytes(dtype);
}

int64_t KVBytesPerLayerK(const KVCacheShape& s, KVDType dtype) {
  return static_cast<int64_t>(s.user_rows) * s.n_kv_heads * s.max_seq * s.head_dim *
         KVDTypeBytes(dtype);
}

KVCache::KVCache(const KVCacheShape& shape, KVDType dtype) : shape_(shape), dtype_(dtype) {
  WC_CHECK(shape.n_layers > 0 && shape.user_rows > 0 && shape.n_kv_heads > 0 && shape.max_seq > 0 &&
               shape.head_dim > 0,
           "empty KV cache shape");
  const int64_t bytes = KVBytesPerLayerK(shape, dtype);
  const int64_t total = 2 * bytes * shape.n_layers;
  if (total > (int64_t{1} << 40))
    throw Error(Cat("KV cache of ", total >> 20, " MiB is too large; lower --ctx or --users"));
  k_.resize(shape.n_layers);
  v_.resize(shape.n_layers);
  for (int l = 0; l < shape.n_layers; ++l) {
    k_[l].assign(static_cast<size_t>(bytes), 0);
    v_[l].assign(static_cast<size_t>(bytes), 0);
  }
}

int64_t KVCache::Offset(int user, int kv_head, int pos) const {
  return ((static_cast<int64_t>(user) * shape_.n_kv_heads + kv_head) * shape_.max_seq + pos) *
         shape_.head_dim;
}

void KVCache::Write(int layer, int user, int pos, const float* k, const float* v) {
  WC_CHECK(layer >= 0 && layer < shape_.n_layers && user >= 0 && user < shape_.user_rows, "layer ",
           layer, " user ", user);
  if (pos < 0 || pos >= shape_.max_seq)
    throw Error(Cat("KV cache full: position ", pos, " is beyond the context of ", shape_.max_seq,
                    " tokens; raise --ctx or shorten the conversation"));
  const int hd = shape_.head_dim;
  for (int h = 0; h < shape_.n_kv_heads; ++h) {
    const int64_t off = Offset(user, h, pos);
    const float* kh = k + static_cast<int64_t>(h) * hd;
    const float* vh = v + static_cast<int64_t>(h) * hd;
    if (dtype_ == KVDType::kBF16) {
      auto* kd = reinterpret_cast<uint16_t*>(k_[layer].data()) + off;
      auto* vd = reinterpret_cast<uint16_t*>(v_[layer].data()) + off;
      for (int d = 0; d < hd; ++d) {
        kd[d] = F32ToBF16(kh[d]);
        vd[d] = F32ToBF16(vh[d]);
      }
    } else {
      std::memcpy(reinterpret_cast<float*>(k_[layer].data()) + off, kh, hd * sizeof(float));
      std::memcpy(reinterpret_cast<float*>(v_[layer].data()) + off, vh, hd * sizeof(float));
    }
  }
}

MatrixRef KVCache::Keys(int layer, int user, int kv_head, int start, int len) const {
  WC_CHECK(start >= 0 && len >= 0 && start + len <= shape_.max_seq, "rows ", start, "+", len);
  MatrixRef m;
  m.dtype = dtype_ == KVDType::kBF16 ? DType::kBF16 : DType::kF32;
  m.rows = len;
  m.cols = m.row_stride = shape_.head_dim;
  m.data = k_[layer].data() + Offset(user, kv_head, start) * KVDTypeBytes(dtype_);
  return m;
}

MatrixRef KVCache::Values(int layer, int user, int kv_head, int start, int len) const {
  MatrixRef m = Keys(layer, user, kv_head, start, len);
  m.data = v_[layer].data() + Offset(user, kv_head, start) * KVDTypeBytes(dtype_);
  return m;
}

}  // namespace wc
