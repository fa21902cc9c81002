#include "kvcache/kv_cache.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "util/bf16.h"
#include "util/error.h"
#include "util/memory.h"

namespace wc {
KVDType ParseKVDType(const std::string& name) {
  for (KVDType d : {KVDType::kBF16, KVDType::kF32, KVDType::kInt8, KVDType::kFP8E4M3,
                    KVDType::kFP8E5M2, KVDType::kBFP8})
    if (name == KVDTypeName(d)) return d;
  throw Error(Cat("--kv-dtype '", name,
                  "' is not supported; choose bf16, f32, int8, fp8-e4m3, fp8-e5m2 or bfp8"));
}

const char* KVDTypeName(KVDType dtype) {
  switch (dtype) {
    case KVDType::kBF16:
      return "bf16";
    case KVDType::kF32:
      return "f32";
    case KVDType::kInt8:
      return "int8";
    case KVDType::kFP8E4M3:
      return "fp8-e4m3";
    case KVDType::kFP8E5M2:
      return "fp8-e5m2";
    case KVDType::kBFP8:
      return "bfp8";
  }
  return "?";
}

bool IsQuantized(KVDType dtype) {
  return dtype != KVDType::kBF16 && dtype != KVDType::kF32;
}

bool HasScale(KVDType dtype) {
  return IsQuantized(dtype) && dtype != KVDType::kBFP8;
}

KVQuant QuantOf(KVDType dtype) {
  switch (dtype) {
    case KVDType::kInt8:
      return KVQuant::kInt8;
    case KVDType::kFP8E4M3:
      return KVQuant::kFP8E4M3;
    case KVDType::kFP8E5M2:
      return KVQuant::kFP8E5M2;
    case KVDType::kBFP8:
      return KVQuant::kBFP8;
    default:
      break;
  }
  WC_CHECK(false, "no row codec for ", KVDTypeName(dtype));
  return KVQuant::kBFP8;
}

ScaleMode ParseScaleMode(const std::string& name) {
  if (name == "token-head") return ScaleMode::kTokenHead;
  if (name == "tensor") return ScaleMode::kTensor;
  throw Error(Cat("--kv-scale '", name, "' is not supported; choose token-head or tensor"));
}

const char* ScaleModeName(ScaleMode mode) {
  return mode == ScaleMode::kTokenHead ? "token-head" : "tensor";
}

int64_t KVRowBytes(KVDType dtype, ScaleMode scale, int head_dim) {
  if (dtype == KVDType::kBF16) return 2LL * head_dim;
  if (dtype == KVDType::kF32) return 4LL * head_dim;
  if (dtype == KVDType::kBFP8 && head_dim % 16 != 0)
    throw Error(
        Cat("--kv-dtype bfp8 needs head_dim to be a multiple of 16 (blocks of 16 values "
            "share an exponent); this model's head_dim is ",
            head_dim));
  return EncodedRowBytes(QuantOf(dtype), scale, head_dim);
}

int64_t KVBytesPerToken(const KVCacheShape& s, KVDType dtype, ScaleMode scale) {
  return 2LL * s.n_layers * s.n_kv_heads * KVRowBytes(dtype, scale, s.head_dim);
}

int64_t KVBytesPerLayerK(const KVCacheShape& s, KVDType dtype, ScaleMode scale) {
  return static_cast<int64_t>(s.user_rows) * s.n_kv_heads * s.max_seq *
         KVRowBytes(dtype, scale, s.head_dim);
}

KVCache::KVCache(const KVCacheShape& shape, const KVCacheOptions& options)
    : shape_(shape), options_(options) {
  WC_CHECK(shape.n_layers > 0 && shape.user_rows > 0 && shape.n_kv_heads > 0 && shape.max_seq > 0 &&
               shape.head_dim > 0,
           "empty KV cache shape");
  row_bytes_ = KVRowBytes(options.dtype, options.scale, shape.head_dim);
  if (HasScale(options.dtype) && options.scale == ScaleMode::kTensor &&
      options.tensor_scales.size() != static_cast<size_t>(2 * shape.n_layers))
    throw Error(Cat("--kv-scale tensor needs calibrated scales for ", shape.n_layers,
                    " layers; run `wormchat calibrate` first"));
  // Every size in 64 bits with overflow checks, and checked against the free memory, before
  // anything is allocated.
  const int64_t max_seq = shape.max_seq, users = shape.user_rows;
  int64_t rows_per_layer =
      CheckedMul(CheckedMul(users, shape.n_kv_heads, "the KV cache size"), max_seq,
                 "the KV cache size");  // [user_rows, n_kv_heads, max_seq]
  int64_t n_blocks = 0;
  if (options.block_size > 0) {
    const int64_t blocks_per_user = (max_seq + options.block_size - 1) / options.block_size;
    if (options.n_blocks < 0)
      throw Error(Cat("--kv-blocks must be >= 0 (0 = every user row's full context), got ",
                      options.n_blocks));
    n_blocks = options.n_blocks > 0 ? options.n_blocks
                                    : CheckedMul(users, blocks_per_user, "the KV block count");
    if (n_blocks > (int64_t{1} << 30))
      throw Error(Cat("a paged KV cache of ", n_blocks, " blocks of ", options.block_size,
                      " tokens is too many (at most 2^30); lower --ctx or --kv-blocks, or raise "
                      "--kv-block-size"));
    rows_per_layer = CheckedMul(CheckedMul(n_blocks, shape.n_kv_heads, "the KV cache size"),
                                options.block_size, "the KV cache size");  // [blocks, heads, bs]
  }
  const int64_t bytes = CheckedMul(rows_per_layer, row_bytes_, "the KV cache size");
  const int64_t total = CheckedAdd(
      CheckedMul(CheckedMul(bytes, 2, "the KV cache size"), shape.n_layers, "the KV cache size"),
      CheckedMul(n_blocks, 2 * sizeof(int),
                 "the KV cache size"),  // the pool's counts and free list
      "the KV cache size");
  CheckFitsInMemory(total,
                    Cat("a ", KVDTypeName(options.dtype), " KV cache of ", shape.user_rows,
                        " user row", shape.user_rows == 1 ? "" : "s", " x ", shape.max_seq,
                        " positions", n_blocks > 0 ? Cat(" (", n_blocks, " blocks)") : ""),
                    "lower --ctx or --kv-blocks, or choose a smaller --kv-dtype");
  if (n_blocks > 0) {
    pool_ = std::make_unique<BlockPool>(static_cast<int>(n_blocks), options.block_size);
    for (int u = 0; u < shape.user_rows; ++u) tables_.emplace_back(*pool_);
  }
  if (pool_ == nullptr) sources_.resize(shape.user_rows);
  if (options.journal) {
    static std::atomic<uint64_t> next_id{1};
    journal_ = std::make_shared<KVJournal>(next_id++);
  }
  amax_.assign(2 * static_cast<size_t>(shape.n_layers), 0.0f);
  for (int l = 0; l < shape.n_layers; ++l) {
    k_.emplace_back(static_cast<size_t>(bytes));
    v_.emplace_back(static_cast<size_t>(bytes));
  }
}

int64_t KVCache::RowOffset(int user, int kv_head, int pos) const {
  if (pool_ == nullptr)
    return ((static_cast<int64_t>(SourceRow(user, pos)) * shape_.n_kv_heads + kv_head) *
                shape_.max_seq +
            pos) *
           row_bytes_;
  const int bs = options_.block_size;
  const int64_t block = tables_[user].block(pos);
  return ((block * shape_.n_kv_heads + kv_head) * bs + pos % bs) * row_bytes_;
}

void KVCache::Write(int layer, int user, int pos, const float* k, const float* v) {
  WC_CHECK(layer >= 0 && layer < shape_.n_layers && user >= 0 && user < shape_.user_rows, "layer ",
           layer, " user ", user);
  if (pos < 0 || pos >= shape_.max_seq)
    throw Error(Cat("KV cache full: position ", pos, " is beyond the context of ", shape_.max_seq,
                    " tokens; raise --ctx or shorten the conversation"));
  const int hd = shape_.head_dim;
  float k_amax = 0.0f, v_amax = 0.0f;
  for (int i = 0; i < shape_.n_kv_heads * hd; ++i) {
    if (!std::isfinite(k[i]) || !std::isfinite(v[i]))
      throw Error(Cat("non-finite ", std::isfinite(k[i]) ? "V" : "K", " value (",
                      std::isfinite(k[i]) ? v[i] : k[i], ") at layer ", layer, ", user row ", user,
                      ", position ", pos, ", KV head ", i / hd,
                      "; the model's activations overflowed"));
    k_amax = std::max(k_amax, std::fabs(k[i]));
    v_amax = std::max(v_amax, std::fabs(v[i]));
  }
  if (pool_ != nullptr) {
    tables_[user].Reserve(pos + 1);
    const auto [from, to] = tables_[user].MakeWritable(pos);
    if (from >= 0) CopyBlock(from, to);
  } else if (pos < static_cast<int>(sources_[user].size())) {
    sources_[user][pos] = user;  // the row's own storage from now on
  }
  amax_[2 * layer] = std::max(amax_[2 * layer], k_amax);
  amax_[2 * layer + 1] = std::max(amax_[2 * layer + 1], v_amax);
  for (int h = 0; h < shape_.n_kv_heads; ++h) {
    const int64_t off = RowOffset(user, h, pos);
    for (int kv = 0; kv < 2; ++kv) {
      const float* src = (kv == 0 ? k : v) + static_cast<int64_t>(h) * hd;
      uint8_t* dst = (kv == 0 ? k_ : v_)[layer].data() + off;
      switch (options_.dtype) {
        case KVDType::kBF16:
          for (int d = 0; d < hd; ++d) {
            const uint16_t b = F32ToBF16(src[d]);
            std::memcpy(dst + 2 * d, &b, 2);
          }
          break;
        case KVDType::kF32:
          std::memcpy(dst, src, static_cast<size_t>(hd) * sizeof(float));
          break;
        default: {
          WC_CHECK(EncodeRow(QuantOf(options_.dtype), options_.scale, TensorScale(layer, kv), src,
                             hd, dst),
                   "checked finite above");
        }
      }
    }
  }
}

int64_t KVCache::storage_bytes() const {
  int64_t bytes = 0;
  for (const auto* stores : {&k_, &v_})
    for (const PageBuffer& b : *stores) bytes += static_cast<int64_t>(b.size());
  return bytes;
}

KVCache::~KVCache() {
  if (journal_) journal_->MarkDestroyed();
}

void KVCache::Apply(const KVCacheOp& op) {
  switch (op.kind) {
    case KVCacheOp::Kind::kReset:
      return ResetUser(op.user);
    case KVCacheOp::Kind::kTruncate:
      return TruncateUser(op.user, op.n_tokens);
    case KVCacheOp::Kind::kShare:
      return ShareUser(op.src, op.user, op.n_tokens);
    case KVCacheOp::Kind::kReorder:
      return ReorderUsers(op.users, op.parents, op.n_tokens);
    case KVCacheOp::Kind::kAdopt:
      return AdoptBlocks(op.user, op.users);
    case KVCacheOp::Kind::kRetain:
      return RetainBlock(op.src);
    case KVCacheOp::Kind::kRelease:
      return ReleaseBlock(op.src);
  }
}

void KVCache::AdoptBlocks(int user, const std::vector<int>& blocks) {
  WC_CHECK(pool_ != nullptr, "adopting blocks needs a paged KV cache");
  WC_CHECK(user >= 0 && user < shape_.user_rows, "adopting into user row ", user);
  WC_CHECK(static_cast<int64_t>(blocks.size()) * options_.block_size <= shape_.max_seq, "adopting ",
           blocks.size(), " blocks into a row of ", shape_.max_seq, " positions");
  for (int b : blocks)
    WC_CHECK(b >= 0 && b < pool_->n_blocks() && pool_->ref_count(b) > 0, "adopting block ", b);
  if (journal_) journal_->Record({KVCacheOp::Kind::kAdopt, user, 0, 0, blocks, {}});
  tables_[user].Clear();
  tables_[user].Adopt(blocks);
}

void KVCache::RetainBlock(int block) {
  WC_CHECK(pool_ != nullptr, "retaining a block needs a paged KV cache");
  if (journal_) journal_->Record({KVCacheOp::Kind::kRetain, 0, block, 0, {}, {}});
  pool_->AddRef(block, /*outside=*/true);
}

void KVCache::ReleaseBlock(int block) {
  WC_CHECK(pool_ != nullptr, "releasing a block needs a paged KV cache");
  if (journal_) journal_->Record({KVCacheOp::Kind::kRelease, 0, block, 0, {}, {}});
  pool_->Release(block, /*outside=*/true);
}

int KVCache::block_refs(int block) const {
  WC_CHECK(pool_ != nullptr && block >= 0 && block < pool_->n_blocks(), "block ", block);
  return pool_->ref_count(block);
}

int KVCache::user_block(int user, int pos) const {
  WC_CHECK(pool_ != nullptr && user >= 0 && user < shape_.user_rows, "user row ", user);
  WC_CHECK(pos >= 0 && pos < tables_[user].capacity(), "position ", pos, " of user row ", user,
           " holding ", tables_[user].capacity());
  return tables_[user].block(pos);
}

void KVCache::ResetUser(int user) {
  if (journal_) journal_->Record({KVCacheOp::Kind::kReset, user, 0, 0, {}, {}});
  if (pool_ != nullptr)
    tables_[user].Clear();
  else
    sources_[user].clear();
}

void KVCache::TruncateUser(int user, int n_tokens) {
  WC_CHECK(user >= 0 && user < shape_.user_rows, "truncating user row ", user);
  WC_CHECK(n_tokens >= 0 && n_tokens <= shape_.max_seq, "truncating to ", n_tokens, " tokens");
  if (journal_) journal_->Record({KVCacheOp::Kind::kTruncate, user, 0, n_tokens, {}, {}});
  if (pool_ != nullptr) tables_[user].Truncate(n_tokens);
}

void KVCache::ShareUser(int src, int dst, int n_tokens) {
  WC_CHECK(pool_ != nullptr, "sharing rows needs a paged KV cache");
  WC_CHECK(src >= 0 && src < shape_.user_rows && dst >= 0 && dst < shape_.user_rows && src != dst,
           "rows ", src, " -> ", dst);
  WC_CHECK(n_tokens >= 0 && n_tokens <= tables_[src].capacity(), "sharing ", n_tokens,
           " tokens of a row holding ", tables_[src].capacity());
  if (journal_) journal_->Record({KVCacheOp::Kind::kShare, dst, src, n_tokens, {}, {}});
  tables_[dst].Clear();
  tables_[dst].ShareFrom(tables_[src], n_tokens);
}

void KVCache::ReorderUsers(const std::vector<int>& users, const std::vector<int>& parents,
                           int n_tokens) {
  WC_CHECK(users.size() == parents.size(), "users and parents differ in length");
  WC_CHECK(n_tokens >= 0 && n_tokens <= shape_.max_seq, "reordering ", n_tokens, " tokens");
  for (int user : users)
    WC_CHECK(user >= 0 && user < shape_.user_rows, "reordering user row ", user);
  for (int parent : parents)
    WC_CHECK(parent == -1 || std::find(users.begin(), users.end(), parent) != users.end(),
             "parent row ", parent, " is not among the reordered rows");
  if (journal_) journal_->Record({KVCacheOp::Kind::kReorder, 0, 0, n_tokens, users, parents});
  if (pool_ == nullptr) {
    ReorderContiguous(users, parents, n_tokens);
    return;
  }
  std::vector<BlockTable> next;  // [users.size()]: shares of the parents' tables, taken first
  for (int parent : parents) {
    next.emplace_back(*pool_);
    if (parent < 0) continue;
    WC_CHECK(n_tokens <= tables_[parent].capacity(), "reordering ", n_tokens,
             " tokens of a row holding ", tables_[parent].capacity());
    next.back().ShareFrom(tables_[parent], n_tokens);
  }
  for (size_t i = 0; i < users.size(); ++i) tables_[users[i]] = std::move(next[i]);
}

void KVCache::ReorderContiguous(const std::vector<int>& users, const std::vector<int>& parents,
                                int n_tokens) {
  std::vector<std::vector<int32_t>> next(users.size());  // taken from the parents first
  for (size_t i = 0; i < users.size(); ++i) {
    if (parents[i] < 0) continue;
    next[i].resize(n_tokens);
    for (int pos = 0; pos < n_tokens; ++pos) next[i][pos] = SourceRow(parents[i], pos);
  }
  for (size_t i = 0; i < users.size(); ++i) sources_[users[i]] = std::move(next[i]);
}

int KVCache::RunLength(int user, int pos, int most) const {
  if (pool_ != nullptr) return std::min(most, options_.block_size - pos % options_.block_size);
  const std::vector<int32_t>& s = sources_[user];
  const int src = SourceRow(user, pos);
  int n = 1;
  while (n < most && SourceRow(user, pos + n) == src) {
    if (pos + n >= static_cast<int>(s.size()) && src == user) return most;  // the row's own rest
    ++n;
  }
  return n;
}

int64_t KVCache::HeldBytes(const std::vector<int>& users, int n_tokens) const {
  std::vector<int64_t> held;  // block ids (paged) or source row * max_seq + position
  for (int user : users) {
    if (pool_ != nullptr) {
      const std::vector<int>& blocks = tables_[user].blocks();
      const size_t n = std::min(blocks.size(), static_cast<size_t>(BlocksFor(n_tokens)));
      held.insert(held.end(), blocks.begin(), blocks.begin() + static_cast<int64_t>(n));
    } else {
      for (int pos = 0; pos < n_tokens; ++pos)
        held.push_back(static_cast<int64_t>(SourceRow(user, pos)) * shape_.max_seq + pos);
    }
  }
  std::sort(held.begin(), held.end());
  const int64_t distinct = std::unique(held.begin(), held.end()) - held.begin();
  return pool_ != nullptr ? distinct * block_bytes()
                          : distinct * 2 * shape_.n_layers * shape_.n_kv_heads * row_bytes_;
}

int64_t KVCache::block_bytes() const {
  if (pool_ == nullptr) return 0;
  return 2 * static_cast<int64_t>(shape_.n_layers) * shape_.n_kv_heads * options_.block_size *
         row_bytes_;
}

void KVCache::ReadBlock(int block, uint8_t* out) const {
  WC_CHECK(
      pool_ != nullptr && block >= 0 && block < pool_->n_blocks() && pool_->ref_count(block) > 0,
      "reading block ", block);
  const int64_t per_layer =
      static_cast<int64_t>(shape_.n_kv_heads) * options_.block_size * row_bytes_;
  for (int l = 0; l < shape_.n_layers; ++l)
    for (const auto* store : {&k_[l], &v_[l]}) {
      std::memcpy(out, store->data() + block * per_layer, static_cast<size_t>(per_layer));
      out += per_layer;
    }
}

int KVCache::ImportBlock(const uint8_t* bytes) {
  WC_CHECK(pool_ != nullptr, "importing a block needs a paged KV cache");
  WC_CHECK(journal_ == nullptr, "a tensor-parallel cache cannot import a persisted block");
  if (pool_->free_blocks() == 0) return -1;
  const int block = pool_->Allocate(/*outside=*/true);
  const int64_t per_layer =
      static_cast<int64_t>(shape_.n_kv_heads) * options_.block_size * row_bytes_;
  for (int l = 0; l < shape_.n_layers; ++l)
    for (auto* store : {&k_[l], &v_[l]}) {
      std::memcpy(store->data() + block * per_layer, bytes, static_cast<size_t>(per_layer));
      bytes += per_layer;
    }
  return block;
}

void KVCache::CopyBlock(int from, int to) {
  const int64_t block_bytes =
      static_cast<int64_t>(shape_.n_kv_heads) * options_.block_size * row_bytes_;
  for (int l = 0; l < shape_.n_layers; ++l)
    for (auto* store : {&k_[l], &v_[l]})
      std::memcpy(store->data() + to * block_bytes, store->data() + from * block_bytes,
                  static_cast<size_t>(block_bytes));
}

RowFormat KVCache::row_format() const {
  if (options_.dtype == KVDType::kBF16) return RowFormat::kBF16;
  if (options_.dtype == KVDType::kF32) return RowFormat::kF32;
  return RowFormatOf(QuantOf(options_.dtype));
}

float KVCache::TensorScale(int layer, int kv) const {
  return options_.scale == ScaleMode::kTensor && !options_.tensor_scales.empty()
             ? options_.tensor_scales[2 * layer + kv]
             : 0.0f;
}

RowsRef KVCache::StoredRows(int layer, int kv, const uint8_t* data, int len) const {
  RowsRef r;
  r.format = row_format();
  r.rows = len;
  r.cols = shape_.head_dim;
  r.row_bytes = row_bytes_;
  r.data = data;
  r.row_scale = HasScale(options_.dtype) && options_.scale == ScaleMode::kTokenHead;
  r.tensor_scale = TensorScale(layer, kv);
  return r;
}

void KVCache::CheckRows(int layer, int user, int kv_head, int start, int len) const {
  WC_CHECK(layer >= 0 && layer < shape_.n_layers && user >= 0 && user < shape_.user_rows &&
               kv_head >= 0 && kv_head < shape_.n_kv_heads,
           "layer ", layer, " user ", user, " kv_head ", kv_head);
  WC_CHECK(start >= 0 && len >= 0 && start + len <= shape_.max_seq, "rows ", start, "+", len);
  WC_CHECK(pool_ == nullptr || start + len <= tables_[user].capacity(), "reading unwritten rows ",
           start, "+", len, " of a paged user row");
}

RowsRef KVCache::Rows(int layer, int kv, int user, int kv_head, int start, int len) const {
  CheckRows(layer, user, kv_head, start, len);
  // One strided run only within a block (paged) or from one source row (contiguous beams).
  if (len > 0 && RunLength(user, start, len) < len) return {};
  const auto& store = kv == 0 ? k_[layer] : v_[layer];
  return StoredRows(layer, kv, store.data() + (len > 0 ? RowOffset(user, kv_head, start) : 0), len);
}

RowsRef KVCache::Keys(int layer, int user, int kv_head, int start, int len) const {
  return Rows(layer, 0, user, kv_head, start, len);
}

RowsRef KVCache::Values(int layer, int user, int kv_head, int start, int len) const {
  return Rows(layer, 1, user, kv_head, start, len);
}

std::pair<RowsRef, RowsRef> KVCache::CopyRows(int layer, int user, int kv_head, int start, int len,
                                              uint8_t* k_buf, uint8_t* v_buf) const {
  CheckRows(layer, user, kv_head, start, len);
  for (int kv = 0; kv < 2; ++kv) {
    const auto& store = kv == 0 ? k_[layer] : v_[layer];
    uint8_t* dst = kv == 0 ? k_buf : v_buf;
    for (int r = 0; r < len;) {  // one memcpy per run of rows in one block or source row
      const int run = RunLength(user, start + r, len - r);
      std::memcpy(dst + static_cast<int64_t>(r) * row_bytes_,
                  store.data() + RowOffset(user, kv_head, start + r),
                  static_cast<size_t>(run) * row_bytes_);
      r += run;
    }
  }
  return {StoredRows(layer, 0, k_buf, len), StoredRows(layer, 1, v_buf, len)};
}

void KVCache::DecodeRows(int layer, int user, int kv_head, int start, int len, float* k_out,
                         float* v_out) const {
  CheckRows(layer, user, kv_head, start, len);
  const int hd = shape_.head_dim;
  for (int kv = 0; kv < 2; ++kv) {
    const auto& store = kv == 0 ? k_[layer] : v_[layer];
    float* out = kv == 0 ? k_out : v_out;
    for (int r = 0; r < len; ++r) {
      const uint8_t* src = store.data() + RowOffset(user, kv_head, start + r);
      float* dst = out + static_cast<int64_t>(r) * hd;
      switch (options_.dtype) {
        case KVDType::kF32:
          std::memcpy(dst, src, static_cast<size_t>(hd) * sizeof(float));
          break;
        case KVDType::kBF16:
          for (int d = 0; d < hd; ++d) {
            uint16_t b;
            std::memcpy(&b, src + 2 * d, 2);
            dst[d] = BF16ToF32(b);
          }
          break;
        default:
          DecodeRow(QuantOf(options_.dtype), options_.scale, TensorScale(layer, kv), src, hd, dst);
      }
    }
  }
}

}  // namespace wc
