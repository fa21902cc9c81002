// FlashDecode with several query positions per user (a verify or prompt chunk of one user row):
// every query's output equals, bit for bit, the single-query op's for that query (each token its
// own user, its K/V as the second part) over KV formats, layouts, chunk sizes, reductions, q_len
// 1..17 and ragged users; the trace reads each user's cached K/V once, not once per query.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <omp.h>

#include "attention/flash_decode.h"
#include "kvcache/kv_cache.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

constexpr int kHeads = 8, kKv = 2, kHd = 64, kSeq = 256, kUsers = 3, kFilled = 200;

// A cache whose user rows hold seeded K/V at positions [0, kFilled) of layer 0.
KVCache Filled(KVDType dtype, int block) {
  KVCacheOptions o;
  o.dtype = dtype;
  o.block_size = block;
  KVCache cache(KVCacheShape{1, kUsers, kKv, kSeq, kHd}, o);
  Rng rng(17);
  std::vector<float> k(kKv * kHd), v(k.size());  // [n_kv, head_dim]
  for (int u = 0; u < kUsers; ++u)
    for (int p = 0; p < kFilled; ++p) {
      for (auto& x : k) x = static_cast<float>(rng.Uniform() * 2 - 1);
      for (auto& x : v) x = static_cast<float>(rng.Uniform() * 2 - 1);
      cache.Write(0, u, p, k.data(), v.data());
    }
  return cache;
}

// One op's users: row, position of its first query, query count. Tokens follow in user order.
struct User {
  int row, pos, q_len;
};

struct Result {
  std::vector<float> out;  // [tokens, kHeads, kHd]
  OpTrace trace;
  int64_t l1_one_more = 0;  // L1 a core would need with one more query per work
};

// Runs the users as the model does: cached part [0, pos + i) of the row, own K/V at pos + i as
// the second part. grouped: one op user per User with q_len queries; otherwise one op user per
// token (the single-query form).
Result RunUsers(const KVCache& cache, const std::vector<User>& users, const std::vector<float>& q,
                const FlashDecodeConfig& cfg, const std::string& mesh, bool grouped) {
  std::vector<int32_t> rows, cur_pos, q_len, zeros;  // [op users]
  std::vector<int32_t> tok_rows, tok_pos;            // [tokens]
  for (const User& u : users) {
    for (int i = 0; i < u.q_len; ++i) {
      tok_rows.push_back(u.row);
      tok_pos.push_back(u.pos + i);
      if (grouped && i > 0) continue;
      rows.push_back(u.row);
      cur_pos.push_back(u.pos + i - 1);
      q_len.push_back(grouped ? u.q_len : 1);
      zeros.push_back(0);
    }
  }
  const KVCacheLayerView cached(cache, 0, rows.data(), zeros.data());
  const KVCacheLayerView own(cache, 0, tok_rows.data(), tok_pos.data());
  Result r;
  r.out.assign(q.size(), -99.0f);
  DecodeAttentionOp op;
  op.bsz = static_cast<int>(rows.size());
  op.n_q_heads = kHeads;
  op.n_kv_heads = kKv;
  op.head_dim = kHd;
  op.kv_len = kSeq;
  op.q = q.data();
  op.kv = &cached;
  op.cur_pos = cur_pos.data();
  op.q_len = grouped ? q_len.data() : nullptr;
  op.new_kv = &own;
  op.scale = 0.125f;
  op.out = r.out.data();
  EXPECT_EQ(op.tokens(), static_cast<int>(tok_rows.size()));
  const FlashDecodeEngine engine(MeshPreset(mesh), cfg);
  r.trace = engine.Run(op);
  r.l1_one_more = engine.L1BytesPerCore(op, r.trace.k_chunk_size, cfg.max_cores_per_head_batch,
                                        r.trace.queries_per_work + 1);
  return r;
}

std::vector<float> Queries(int tokens) {
  Rng rng(5);
  std::vector<float> q(size_t(tokens) * kHeads * kHd);
  for (auto& x : q) x = static_cast<float>(rng.Uniform() * 4 - 2);
  return q;
}

int Tokens(const std::vector<User>& users) {
  int n = 0;
  for (const User& u : users) n += u.q_len;
  return n;
}

// K + V bytes the cached part of `users` costs when each run of up to `per_work` of a user's
// queries reads its chunks once: whole 32-row tiles of every chunk up to the run's last query's
// position, per KV head; plus each token's own row (the second part).
double ReadOnceBytes(const std::vector<User>& users, int chunk, int per_work, double row_bytes) {
  double rows = 0;
  for (const User& u : users) {
    for (int first = 0; first < u.q_len; first += per_work) {
      const int last = std::min(u.q_len, first + per_work) - 1;
      const int limit = u.pos + last;  // rows the run's last query attends in the cached part
      for (int start = 0; start < limit; start += chunk) rows += std::min(chunk, kSeq - start);
    }
    rows += u.q_len;  // own rows
  }
  return 2.0 * kKv * rows * row_bytes;
}

TEST(FlashDecodeMultiQuery, EachQueryEqualsItsSingleQueryRunBitForBit) {
  for (KVDType dtype :
       {KVDType::kF32, KVDType::kBF16, KVDType::kInt8, KVDType::kFP8E4M3, KVDType::kBFP8}) {
    for (int block : {0, 16}) {
      const KVCache cache = Filled(dtype, block);
      for (int chunk : {32, 64, 0}) {
        for (int q_len = 1; q_len <= 17; ++q_len) {
          // Ragged: a long user, a fresh one (first query at position 0), a short verify chunk.
          const std::vector<User> users = {{1, 150, q_len}, {0, 0, 3}, {2, 61, 1 + q_len % 5}};
          const std::vector<float> q = Queries(Tokens(users));
          FlashDecodeConfig cfg;
          cfg.k_chunk_size = chunk;
          cfg.reduction = q_len % 2 == 0 ? Reduction::kTree : Reduction::kFlat;
          const Result multi = RunUsers(cache, users, q, cfg, "n150", true);
          const Result single = RunUsers(cache, users, q, cfg, "n150", false);
          const std::string what = std::string(KVDTypeName(dtype)) + " block " +
                                   std::to_string(block) + " chunk " + std::to_string(chunk) +
                                   " q_len " + std::to_string(q_len);
          ASSERT_EQ(
              0, std::memcmp(multi.out.data(), single.out.data(), multi.out.size() * sizeof(float)))
              << what;
          EXPECT_EQ(multi.trace.k_chunk_size, single.trace.k_chunk_size) << what;
          // A user's queries share one work unless one more would not fit a core's L1 (f32 K/V
          // in 256-row chunks with flat reduction slots: 16 of 17 fit).
          const int longest = std::max({q_len, 3, 1 + q_len % 5});
          const int per_work = multi.trace.queries_per_work;
          EXPECT_LE(per_work, longest) << what;
          if (per_work < longest) {
            EXPECT_GT(multi.l1_one_more, MeshPreset("n150").chip.l1_bytes) << what;
          }
          if (dtype != KVDType::kF32) {
            EXPECT_EQ(per_work, longest) << what;
          }
          // Read once per user (per run of queries); the single-query form reads a user's rows
          // once per query.
          EXPECT_EQ(multi.trace.dram_bytes,
                    ReadOnceBytes(users, multi.trace.k_chunk_size, per_work, cache.RowBytes()))
              << what;
          EXPECT_EQ(single.trace.dram_bytes,
                    ReadOnceBytes(users, single.trace.k_chunk_size, 1, cache.RowBytes()))
              << what;
          if (q_len > 1) {
            EXPECT_GT(single.trace.dram_bytes, multi.trace.dram_bytes) << what;
          }
        }
      }
    }
  }
}

TEST(FlashDecodeMultiQuery, SameBitsOnAnySplitReductionAndChipCount) {
  const KVCache cache = Filled(KVDType::kBF16, 0);
  const std::vector<User> users = {{0, 120, 9}, {1, 5, 2}};
  const std::vector<float> q = Queries(Tokens(users));
  FlashDecodeConfig cfg;
  cfg.k_chunk_size = 32;
  const Result base = RunUsers(cache, users, q, cfg, "n150", false);
  for (int cores : {1, 3, 16, 64}) {
    for (Reduction red : {Reduction::kFlat, Reduction::kTree}) {
      for (const char* mesh : {"n150", "t3k"}) {
        FlashDecodeConfig c = cfg;
        c.max_cores_per_head_batch = cores;
        c.reduction = red;
        const Result got = RunUsers(cache, users, q, c, mesh, true);
        EXPECT_EQ(0, std::memcmp(base.out.data(), got.out.data(), base.out.size() * sizeof(float)))
            << cores << " cores " << ReductionName(red) << " " << mesh;
      }
    }
  }
}

// Every field of two traces, core by core.
void ExpectSameTrace(const OpTrace& a, const OpTrace& b, const std::string& what) {
  EXPECT_EQ(a.dram_bytes, b.dram_bytes) << what;
  EXPECT_EQ(a.noc_bytes, b.noc_bytes) << what;
  EXPECT_EQ(a.cores_used, b.cores_used) << what;
  EXPECT_EQ(a.cores_per_work, b.cores_per_work) << what;
  EXPECT_EQ(a.queries_per_work, b.queries_per_work) << what;
  ASSERT_EQ(a.cores.size(), b.cores.size()) << what;
  for (size_t i = 0; i < a.cores.size(); ++i) {
    const CoreTrace &x = a.cores[i], &y = b.cores[i];
    const std::string at = what + " core " + std::to_string(i);
    EXPECT_EQ(x.chip, y.chip) << at;
    EXPECT_EQ(x.core, y.core) << at;
    EXPECT_EQ(x.works, y.works) << at;
    EXPECT_EQ(x.queries, y.queries) << at;
    EXPECT_EQ(x.group_size, y.group_size) << at;
    EXPECT_EQ(x.rank, y.rank) << at;
    EXPECT_EQ(x.chunks, y.chunks) << at;
    EXPECT_EQ(x.chunk_rows, y.chunk_rows) << at;
    EXPECT_EQ(x.dram_bytes, y.dram_bytes) << at;
    EXPECT_EQ(x.matmul_tiles, y.matmul_tiles) << at;
    EXPECT_EQ(x.sfpu_tiles, y.sfpu_tiles) << at;
    ASSERT_EQ(x.writes.size(), y.writes.size()) << at;
    for (size_t k = 0; k < x.writes.size(); ++k) {
      EXPECT_EQ(x.writes[k].dst_core, y.writes[k].dst_core) << at;
      EXPECT_EQ(x.writes[k].bytes, y.writes[k].bytes) << at;
      EXPECT_EQ(x.writes[k].hops, y.writes[k].hops) << at;
      EXPECT_EQ(x.writes[k].step, y.writes[k].step) << at;
    }
    EXPECT_EQ(x.received_per_step, y.received_per_step) << at;
    EXPECT_EQ(x.sem_waits, y.sem_waits) << at;
    EXPECT_EQ(x.merge_tiles, y.merge_tiles) << at;
    EXPECT_EQ(x.merge_tiles_per_step, y.merge_tiles_per_step) << at;
    EXPECT_EQ(x.final_merge_tiles, y.final_merge_tiles) << at;
  }
}

// Fewer emulated cores than host threads (a verify chunk whose cached positions fit one chunk is
// one core per KV head): the host splits a core's queries over its threads, which must change
// neither a bit of any output nor anything the trace reports.
TEST(FlashDecodeMultiQuery, HostThreadsSplittingACoresQueriesChangeNoBitNorTheTrace) {
  const KVCache cache = Filled(KVDType::kBF16, 16);
  const std::vector<std::vector<User>> batches = {
      {{1, 150, 9}}, {{1, 150, 9}, {0, 0, 3}}, {{2, 61, 17}, {0, 199, 2}, {1, 30, 1}}};
  for (int chunk : {256, 32}) {  // one chunk a work; several, reduced over a core group
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const std::vector<User>& users = batches[bi];
      const std::vector<float> q = Queries(Tokens(users));
      FlashDecodeConfig cfg;
      cfg.k_chunk_size = chunk;
      omp_set_num_threads(1);
      const Result base = RunUsers(cache, users, q, cfg, "n150", true);
      for (int threads : {2, 3, 8, 16}) {
        omp_set_num_threads(threads);
        const Result got = RunUsers(cache, users, q, cfg, "n150", true);
        const std::string what = "chunk " + std::to_string(chunk) + " batch " + std::to_string(bi) +
                                 " threads " + std::to_string(threads);
        EXPECT_EQ(0, std::memcmp(base.out.data(), got.out.data(), base.out.size() * sizeof(float)))
            << what;
        ExpectSameTrace(base.trace, got.trace, what);
      }
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(FlashDecodeMultiQuery, QueriesBeyondL1RunInSeveralWorksWithTheSameBits) {
  // head_dim 256 with 32 query heads per KV head: a query's Q, partials and output take about
  // 100 KiB of L1, so 17 queries cannot share one core's L1 with the K/V chunks.
  constexpr int kBigHd = 256, kBigHeads = 32, kLen = 512;
  KVCacheOptions o;
  o.dtype = KVDType::kBF16;
  KVCache cache(KVCacheShape{1, 1, 1, kLen, kBigHd}, o);
  Rng rng(3);
  std::vector<float> k(kBigHd), v(kBigHd);
  for (int p = 0; p < 300; ++p) {
    for (auto& x : k) x = static_cast<float>(rng.Uniform() * 2 - 1);
    for (auto& x : v) x = static_cast<float>(rng.Uniform() * 2 - 1);
    cache.Write(0, 0, p, k.data(), v.data());
  }
  constexpr int kQ = 17, kPos = 250;
  std::vector<float> q(size_t(kQ) * kBigHeads * kBigHd);
  for (auto& x : q) x = static_cast<float>(rng.Uniform() * 2 - 1);
  auto run = [&](bool grouped) {
    std::vector<int32_t> rows, cur_pos, q_len, zeros, tok_rows(kQ, 0), tok_pos(kQ);
    for (int i = 0; i < kQ; ++i) {
      tok_pos[i] = kPos + i;
      if (grouped && i > 0) continue;
      rows.push_back(0);
      cur_pos.push_back(kPos + i - 1);
      q_len.push_back(grouped ? kQ : 1);
      zeros.push_back(0);
    }
    const KVCacheLayerView cached(cache, 0, rows.data(), zeros.data());
    const KVCacheLayerView own(cache, 0, tok_rows.data(), tok_pos.data());
    Result r;
    r.out.assign(q.size(), -99.0f);
    DecodeAttentionOp op;
    op.bsz = static_cast<int>(rows.size());
    op.n_q_heads = kBigHeads;
    op.n_kv_heads = 1;
    op.head_dim = kBigHd;
    op.kv_len = kLen;
    op.q = q.data();
    op.kv = &cached;
    op.cur_pos = cur_pos.data();
    op.q_len = grouped ? q_len.data() : nullptr;
    op.new_kv = &own;
    op.scale = 0.0625f;
    op.out = r.out.data();
    r.trace = FlashDecodeEngine(MeshPreset("n150"), FlashDecodeConfig{}).Run(op);
    return r;
  };
  const Result multi = run(true), single = run(false);
  EXPECT_EQ(0, std::memcmp(multi.out.data(), single.out.data(), multi.out.size() * sizeof(float)));
  EXPECT_GT(multi.trace.queries_per_work, 1);
  EXPECT_LT(multi.trace.queries_per_work, kQ);
  EXPECT_LE(multi.trace.l1_bytes_per_core, MeshPreset("n150").chip.l1_bytes);
  EXPECT_LT(multi.trace.dram_bytes, single.trace.dram_bytes);
}

TEST(FlashDecodeMultiQuery, RejectsAnEmptyQueryRunAndOneRunningPastTheCache) {
  const KVCache cache = Filled(KVDType::kF32, 0);
  FlashDecodeConfig cfg;
  const std::vector<float> q = Queries(4);
  EXPECT_THROW(RunUsers(cache, {{0, kSeq - 2, 4}}, q, cfg, "n150", true), Error);  // past kv_len
  std::vector<int32_t> rows = {0}, zeros = {0}, cur_pos = {10}, q_len = {0};
  const KVCacheLayerView view(cache, 0, rows.data(), zeros.data());
  std::vector<float> out(q.size());
  DecodeAttentionOp op;
  op.bsz = 1;
  op.n_q_heads = kHeads;
  op.n_kv_heads = kKv;
  op.head_dim = kHd;
  op.kv_len = kSeq;
  op.q = q.data();
  op.kv = &view;
  op.cur_pos = cur_pos.data();
  op.q_len = q_len.data();
  op.out = out.data();
  EXPECT_THROW(FlashDecodeEngine(MeshPreset("n150"), cfg).Run(op), Error);
}

}  // namespace
}  // namespace wc
