#include "model/tensor_parallel.h"

#include "dist/communicator.h"
#include "dist/exchange.h"
#include "model/decoder_model.h"
#include "util/error.h"

namespace wc {
namespace {

enum class StepKind : uint32_t { kForward = 1, kStop = 2 };

void WriteOp(WireWriter& w, const KVCacheOp& op) {
  w.U32(static_cast<uint32_t>(op.kind));
  w.I64(op.user);
  w.I64(op.src);
  w.I64(op.n_tokens);
  w.U32(static_cast<uint32_t>(op.users.size()));
  for (int u : op.users) w.I64(u);
  w.U32(static_cast<uint32_t>(op.parents.size()));  // kReorder: as many as users; else none
  for (int p : op.parents) w.I64(p);
}

KVCacheOp ReadOp(WireReader& in) {
  KVCacheOp op;
  const uint32_t kind = in.U32();
  WC_CHECK(kind <= static_cast<uint32_t>(KVCacheOp::Kind::kTruncate), "KV cache op kind ", kind);
  op.kind = static_cast<KVCacheOp::Kind>(kind);
  op.user = static_cast<int>(in.I64());
  op.src = static_cast<int>(in.I64());
  op.n_tokens = static_cast<int>(in.I64());
  for (uint32_t i = 0, n = in.U32(); i < n; ++i) op.users.push_back(static_cast<int>(in.I64()));
  for (uint32_t i = 0, n = in.U32(); i < n; ++i) op.parents.push_back(static_cast<int>(in.I64()));
  return op;
}

void WriteInts(WireWriter& w, const std::vector<int32_t>& v) {
  w.U32(static_cast<uint32_t>(v.size()));
  for (int32_t x : v) w.I64(x);
}

std::vector<int32_t> ReadInts(WireReader& in) {
  std::vector<int32_t> v(in.U32());
  for (int32_t& x : v) x = static_cast<int32_t>(in.I64());
  return v;
}

}  // namespace

void TensorParallelLeader::Announce(const TokenBatch& batch, const KVCache& cache) {
  std::lock_guard<std::mutex> lock(mu_);
  WC_CHECK(!stopped_, "a forward pass after the tensor-parallel group stopped");
  WC_CHECK(cache.journal() != nullptr,
           "a tensor-parallel forward pass needs a KV cache made with KVCacheOptions::journal");
  WireWriter w;
  w.U32(static_cast<uint32_t>(StepKind::kForward));
  // Caches gone since the last step: the followers drop theirs.
  std::vector<uint64_t> released;
  for (auto it = caches_.begin(); it != caches_.end();) {
    if (it->second->destroyed()) {
      released.push_back(it->first);
      it = caches_.erase(it);
    } else {
      ++it;
    }
  }
  w.U32(static_cast<uint32_t>(released.size()));
  for (uint64_t id : released) w.I64(static_cast<int64_t>(id));
  // The cache: identity, shape and options.
  const KVCacheShape& s = cache.shape();
  const KVCacheOptions& o = cache.options();
  caches_.emplace(cache.journal()->id(), cache.journal());
  w.I64(static_cast<int64_t>(cache.journal()->id()));
  w.I64(s.user_rows);
  w.I64(s.max_seq);
  w.U32(static_cast<uint32_t>(o.dtype));
  w.U32(static_cast<uint32_t>(o.scale));
  w.I64(o.block_size);
  w.I64(o.n_blocks);
  w.U32(static_cast<uint32_t>(o.tensor_scales.size()));
  for (float x : o.tensor_scales) w.F64(x);
  // The row operations since the last step, then the batch.
  const std::vector<KVCacheOp> ops = cache.journal()->Take();
  w.U32(static_cast<uint32_t>(ops.size()));
  for (const KVCacheOp& op : ops) WriteOp(w, op);
  WriteInts(w, batch.tokens);
  WriteInts(w, batch.user_rows);
  WriteInts(w, batch.positions);
  WriteInts(w, batch.logit_rows);
  std::string bytes = w.bytes();
  BroadcastBytes(group_, &bytes, 0);
}

void TensorParallelLeader::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  stopped_ = true;
  if (group_.broken()) return;  // a rank is gone: the job ends with the error that said so
  WireWriter w;
  w.U32(static_cast<uint32_t>(StepKind::kStop));
  std::string bytes = w.bytes();
  BroadcastBytes(group_, &bytes, 0);
}

void FollowSteps(const DecoderModel& model, const std::function<void(const KVCache&)>& after_step) {
  Communicator& group = *model.options().tensor_group;
  WC_CHECK(group.rank() != 0, "rank 0 leads; it does not follow");
  std::map<uint64_t, std::unique_ptr<KVCache>> caches;  // id -> this rank's cache of rank 0's
  std::vector<float> logits;
  for (;;) {
    std::string bytes;
    BroadcastBytes(group, &bytes, 0);
    WireReader in(bytes, "rank 0's tensor-parallel step");
    const auto kind = static_cast<StepKind>(in.U32());
    if (kind == StepKind::kStop) return;
    WC_CHECK(kind == StepKind::kForward, "unknown tensor-parallel step ", static_cast<int>(kind));
    for (uint32_t n = in.U32(); n > 0; --n) caches.erase(static_cast<uint64_t>(in.I64()));
    const auto id = static_cast<uint64_t>(in.I64());
    const int user_rows = static_cast<int>(in.I64()), max_seq = static_cast<int>(in.I64());
    KVCacheOptions o;
    o.dtype = static_cast<KVDType>(in.U32());
    o.scale = static_cast<ScaleMode>(in.U32());
    o.block_size = static_cast<int>(in.I64());
    o.n_blocks = static_cast<int>(in.I64());
    o.tensor_scales.resize(in.U32());
    for (float& x : o.tensor_scales) x = static_cast<float>(in.F64());
    std::unique_ptr<KVCache>& cache = caches[id];
    if (!cache) cache = std::make_unique<KVCache>(model.CacheShape(user_rows, max_seq), o);
    for (uint32_t n = in.U32(); n > 0; --n) cache->Apply(ReadOp(in));
    TokenBatch batch;
    batch.tokens = ReadInts(in);
    batch.user_rows = ReadInts(in);
    batch.positions = ReadInts(in);
    batch.logit_rows = ReadInts(in);
    WC_CHECK(in.done(), "rank 0's tensor-parallel step has trailing bytes");
    try {
      model.Forward(batch, *cache, &logits);
    } catch (const Error&) {
      // Every rank stopped this pass at the same layer with the same error, which rank 0 reports
      // (DecoderModel's sums vote on errors); its loop goes on, and so does this one.
    }
    if (after_step) after_step(*cache);
  }
}

}  // namespace wc
