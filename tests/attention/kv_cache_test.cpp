// The KV cache's formats and layouts read through the FlashDecode engine: paged == contiguous bit
// for bit, each quantized format within its bound of FP32 attention, and bad input refused.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "attention/flash_decode.h"
#include "kvcache/kv_cache.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

constexpr int kCacheHeads = 8, kCacheKvHeads = 2, kCacheHeadDim = 64, kLen = 300, kCacheUsers = 2;

// Writes the same seeded tokens into `cache` (layer 0) for every user, and returns them:
// [users, kv_len, n_kv, head_dim] for K then V.
std::vector<float> Fill(KVCache& cache) {
  Rng rng(9);
  std::vector<float> kv(size_t(2) * kCacheUsers * kLen * kCacheKvHeads * kCacheHeadDim);
  for (auto& x : kv) x = static_cast<float>((rng.Uniform() * 2 - 1) * (1 + 3 * rng.Uniform()));
  const size_t half = kv.size() / 2;
  for (int u = 0; u < kCacheUsers; ++u)
    for (int p = 0; p < kLen; ++p) {
      const size_t off = (size_t(u) * kLen + p) * kCacheKvHeads * kCacheHeadDim;
      cache.Write(0, u, p, &kv[off], &kv[half + off]);
    }
  return kv;
}

// Attention of seeded queries over the cache: [users, heads, head_dim].
std::vector<float> Attend(const KVCache& cache, int max_cores = 16) {
  Rng rng(4);
  std::vector<float> q(size_t(kCacheUsers) * kCacheHeads * kCacheHeadDim), out(q.size());
  for (auto& x : q) x = static_cast<float>(rng.Uniform() * 2 - 1);
  std::vector<int32_t> users = {0, 1}, zeros = {0, 0}, cur_pos = {kLen - 1, kLen / 2};
  KVCacheLayerView view(cache, 0, users.data(), zeros.data());
  FlashDecodeConfig cfg;
  cfg.k_chunk_size = 64;
  cfg.max_cores_per_head_batch = max_cores;
  FlashDecodeEngine engine(MeshPreset("n150"), cfg);
  DecodeAttentionOp op;
  op.bsz = kCacheUsers;
  op.n_q_heads = kCacheHeads;
  op.n_kv_heads = kCacheKvHeads;
  op.head_dim = kCacheHeadDim;
  op.kv_len = cache.shape().max_seq;
  op.q = q.data();
  op.kv = &view;
  op.cur_pos = cur_pos.data();
  op.scale = 0.125f;
  op.out = out.data();
  engine.Run(op);
  return out;
}

KVCacheShape Shape() {
  return KVCacheShape{1, kCacheUsers, kCacheKvHeads, 512, kCacheHeadDim};
}

KVCacheOptions Opts(KVDType d, int block = 0, ScaleMode s = ScaleMode::kTokenHead) {
  KVCacheOptions o;
  o.dtype = d;
  o.block_size = block;
  o.scale = s;
  return o;
}

TEST(KVCache, PagedEqualsContiguousBitForBitInEveryFormat) {
  for (KVDType d : {KVDType::kBF16, KVDType::kF32, KVDType::kInt8, KVDType::kFP8E4M3,
                    KVDType::kFP8E5M2, KVDType::kBFP8}) {
    KVCache contiguous(Shape(), Opts(d));
    Fill(contiguous);
    const auto base = Attend(contiguous);
    for (int block : {16, 32, 128}) {
      KVCache paged(Shape(), Opts(d, block));
      Fill(paged);
      const auto got = Attend(paged, block == 32 ? 3 : 16);
      EXPECT_EQ(0, std::memcmp(base.data(), got.data(), base.size() * sizeof(float)))
          << KVDTypeName(d) << " block " << block;
    }
  }
}

TEST(KVCache, QuantizedAttentionWithinEachFormatsBoundOfFp32) {
  KVCache exact(Shape(), Opts(KVDType::kF32));
  Fill(exact);
  const auto ref = Attend(exact);
  // Relative max error of the attention output (values ~N(0, 1)-ish, softmax-averaged).
  const std::pair<KVDType, double> bounds[] = {{KVDType::kBF16, 0.01},
                                               {KVDType::kInt8, 0.03},
                                               {KVDType::kFP8E4M3, 0.08},
                                               {KVDType::kFP8E5M2, 0.15},
                                               {KVDType::kBFP8, 0.04}};
  for (const auto& [d, bound] : bounds) {
    KVCache cache(Shape(), Opts(d));
    Fill(cache);
    const double err = test::RelMaxError(Attend(cache), ref);
    EXPECT_LE(err, bound) << KVDTypeName(d);
    EXPECT_GT(err, 0.0) << KVDTypeName(d);
  }
}

TEST(KVCache, TensorScalesNeedCalibrationAndSaturateBeyondIt) {
  EXPECT_THROW(KVCache(Shape(), Opts(KVDType::kInt8, 0, ScaleMode::kTensor)), Error);
  KVCacheOptions o = Opts(KVDType::kInt8, 0, ScaleMode::kTensor);
  o.tensor_scales = {1.0f / 127, 1.0f / 127};  // calibrated for |x| <= 1
  KVCache cache(Shape(), o);
  std::vector<float> k(kCacheKvHeads * kCacheHeadDim, 0.5f),
      v(kCacheKvHeads * kCacheHeadDim, 0.25f), out_k(kCacheHeadDim), out_v(kCacheHeadDim);
  k[0] = 40.0f;  // beyond the calibrated range
  cache.Write(0, 0, 0, k.data(), v.data());
  cache.DecodeRows(0, 0, 0, 0, 1, out_k.data(), out_v.data());
  EXPECT_NEAR(out_k[0], 1.0f, 1e-6);  // saturated
  EXPECT_NEAR(out_k[1], 0.5f, 0.005f);
  EXPECT_NEAR(out_v[3], 0.25f, 0.005f);
}

TEST(KVCache, NonFiniteValuesAreReportedByLayerAndPosition) {
  KVCache cache(KVCacheShape{3, 1, kCacheKvHeads, 16, kCacheHeadDim}, Opts(KVDType::kInt8));
  std::vector<float> k(kCacheKvHeads * kCacheHeadDim, 0.1f), v(kCacheKvHeads * kCacheHeadDim, 0.1f);
  v[kCacheHeadDim + 3] = std::numeric_limits<float>::quiet_NaN();
  try {
    cache.Write(2, 0, 7, k.data(), v.data());
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("non-finite V value"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("position 7"), std::string::npos) << msg;
    EXPECT_NE(msg.find("KV head 1"), std::string::npos) << msg;
  }
  k[0] = std::numeric_limits<float>::infinity();
  v[kCacheHeadDim + 3] = 0.0f;
  EXPECT_THROW(cache.Write(0, 0, 0, k.data(), v.data()), Error);
}

TEST(KVCache, FullCacheIsAClearErrorAndResetReusesBlocks) {
  KVCache cache(KVCacheShape{1, 1, kCacheKvHeads, 64, kCacheHeadDim}, Opts(KVDType::kBF16, 32));
  std::vector<float> k(kCacheKvHeads * kCacheHeadDim, 0.1f);
  for (int p = 0; p < 64; ++p) cache.Write(0, 0, p, k.data(), k.data());
  try {
    cache.Write(0, 0, 64, k.data(), k.data());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache full"), std::string::npos) << e.what();
  }
  cache.ResetUser(0);
  for (int p = 0; p < 64; ++p) cache.Write(0, 0, p, k.data(), k.data());  // blocks reused
}

// Beams share a prompt's blocks: no bytes are copied until a row writes into a block it shares,
// and then only that block; a reorder moves block references, never K/V bytes; every block goes
// back to the pool at the end.
TEST(KVCache, SharedRowsCopyOnlyTheBlockTheyWriteAndReorderWithoutCopying) {
  constexpr int kBlock = 8, kPrompt = 20, kLayers = 2;
  KVCacheOptions o = Opts(KVDType::kInt8, kBlock);
  KVCache cache(KVCacheShape{kLayers, 3, kCacheKvHeads, 64, kCacheHeadDim}, o);
  const int free0 = cache.free_blocks();
  Rng rng(3);
  auto token = [&] {
    std::vector<float> v(kCacheKvHeads * kCacheHeadDim);
    for (auto& x : v) x = static_cast<float>(rng.Uniform() * 2 - 1);
    return v;
  };
  for (int p = 0; p < kPrompt; ++p) {
    const std::vector<float> k = token(), v = token();
    for (int l = 0; l < kLayers; ++l) cache.Write(l, 0, p, k.data(), v.data());
  }
  // Rows [layer][pos] decoded from `user`: K then V, [kv_head, head_dim] each.
  auto rows = [&](int user, int layer, int pos) {
    std::vector<float> out(size_t(2) * kCacheKvHeads * kCacheHeadDim);
    for (int h = 0; h < kCacheKvHeads; ++h)
      cache.DecodeRows(layer, user, h, pos, 1, &out[h * kCacheHeadDim],
                       &out[(kCacheKvHeads + h) * kCacheHeadDim]);
    return out;
  };
  std::vector<std::vector<float>> prompt;  // [layer * kPrompt + pos]
  for (int l = 0; l < kLayers; ++l)
    for (int p = 0; p < kPrompt; ++p) prompt.push_back(rows(0, l, p));
  EXPECT_EQ(free0 - cache.free_blocks(), 3);
  cache.ShareUser(0, 1, kPrompt);
  cache.ShareUser(0, 2, kPrompt);
  EXPECT_EQ(free0 - cache.free_blocks(), 3) << "sharing allocates nothing";
  EXPECT_EQ(cache.user_blocks(1), 3);
  // Each row writes its own position 20 (inside the shared, partly filled third block).
  std::vector<std::vector<float>> own(3);
  for (int u = 0; u < 3; ++u) {
    const std::vector<float> k = token(), v = token();
    for (int l = 0; l < kLayers; ++l) cache.Write(l, u, kPrompt, k.data(), v.data());
    own[u] = rows(u, 1, kPrompt);
  }
  // Rows 0 and 1 each got a private copy of block 2; row 2 was left its only owner.
  EXPECT_EQ(free0 - cache.free_blocks(), 5);
  for (int u = 0; u < 3; ++u)
    for (int l = 0; l < kLayers; ++l)
      for (int p = 0; p < kPrompt; ++p)
        ASSERT_EQ(rows(u, l, p), prompt[l * kPrompt + p]) << "user " << u << " pos " << p;
  EXPECT_NE(own[0], own[1]);
  // Beams 0 and 1 both continue from beam 2; beam 2 from beam 0.
  cache.ReorderUsers({0, 1, 2}, {2, 2, 0}, kPrompt + 1);
  EXPECT_EQ(rows(0, 1, kPrompt), own[2]);
  EXPECT_EQ(rows(1, 1, kPrompt), own[2]);
  EXPECT_EQ(rows(2, 1, kPrompt), own[0]);
  EXPECT_EQ(free0 - cache.free_blocks(), 4) << "row 1's private block went back";
  for (int u = 0; u < 3; ++u) cache.ResetUser(u);
  EXPECT_EQ(cache.free_blocks(), free0);
}

TEST(KVCache, ContiguousBeamsFollowTheIndirectionAndMoveNoBytes) {
  // Three beam rows in the contiguous layout: a prompt in row 0, reorderings after each step, and
  // every row must read exactly what its lineage wrote - in place where a chunk comes from one
  // row's storage, gathered by CopyRows where it spans rows - while nothing is copied.
  constexpr int kPrompt = 10, kLayers = 2, kSteps = 6;
  KVCache cache(KVCacheShape{kLayers, 3, kCacheKvHeads, 32, kCacheHeadDim},
                Opts(KVDType::kBF16, 0));
  Rng rng(5);
  auto token = [&] {
    std::vector<float> v(kCacheKvHeads * kCacheHeadDim);
    for (auto& x : v) x = static_cast<float>(rng.Uniform() * 2 - 1);
    return v;
  };
  auto rows = [&](int user, int layer, int pos) {
    std::vector<float> out(size_t(2) * kCacheKvHeads * kCacheHeadDim);
    for (int h = 0; h < kCacheKvHeads; ++h)
      cache.DecodeRows(layer, user, h, pos, 1, &out[h * kCacheHeadDim],
                       &out[(kCacheKvHeads + h) * kCacheHeadDim]);
    return out;
  };
  // Expected rows of each beam: [beam][pos] -> K/V as decoded when written.
  std::vector<std::vector<std::vector<float>>> want(3);
  for (int p = 0; p < kPrompt; ++p) {
    const std::vector<float> k = token(), v = token();
    for (int l = 0; l < kLayers; ++l) cache.Write(l, 0, p, k.data(), v.data());
    want[0].push_back(rows(0, 1, p));
  }
  const std::vector<std::vector<int>> parents = {{0, 0, 0},  {1, 0, 0}, {2, 2, 1},
                                                 {0, 1, -1}, {1, 1, 0}, {0, 2, 1}};
  int n_live = 1;
  for (int step = 0; step < kSteps; ++step) {
    const int cur_pos = kPrompt + step;
    cache.ReorderUsers({0, 1, 2}, parents[step], cur_pos);
    std::vector<std::vector<std::vector<float>>> next(3);
    for (int u = 0; u < 3; ++u)
      if (parents[step][u] >= 0) next[u] = want[parents[step][u]];
    want = next;
    n_live = 0;
    for (int u = 0; u < 3; ++u) {
      if (parents[step][u] < 0) continue;
      ++n_live;
      const std::vector<float> k = token(), v = token();
      for (int l = 0; l < kLayers; ++l) cache.Write(l, u, cur_pos, k.data(), v.data());
      want[u].push_back(rows(u, 1, cur_pos));
    }
    for (int u = 0; u < 3; ++u)
      for (size_t p = 0; p < want[u].size(); ++p)
        ASSERT_EQ(rows(u, 1, static_cast<int>(p)), want[u][p])
            << "step " << step << " row " << u << " pos " << p;
  }
  EXPECT_EQ(n_live, 3);
  // Row 2's history spans rows: the prompt in row 0's storage, later tokens elsewhere. Reading it
  // in place is refused; CopyRows gathers the same bytes the decoder sees.
  const int len = kPrompt + kSteps;
  EXPECT_EQ(cache.Keys(1, 2, 0, 0, len).data, nullptr);
  EXPECT_NE(cache.Keys(1, 2, 0, 0, kPrompt).data, nullptr) << "the prompt is one run of row 0";
  std::vector<uint8_t> kb(len * static_cast<size_t>(cache.RowBytes())),
      vb(len * static_cast<size_t>(cache.RowBytes()));
  const auto [k_rows, v_rows] = cache.CopyRows(1, 2, 0, 0, len, kb.data(), vb.data());
  for (int p = 0; p < len; ++p) {
    std::vector<float> k(kCacheHeadDim), v(kCacheHeadDim);
    cache.DecodeRows(1, 2, 0, p, 1, k.data(), v.data());
    uint16_t b;
    std::memcpy(&b, kb.data() + p * static_cast<size_t>(cache.RowBytes()), 2);
    EXPECT_EQ(BF16ToF32(b), k[0]) << "pos " << p;
  }
  (void)k_rows, (void)v_rows;
  for (int u = 0; u < 3; ++u) cache.ResetUser(u);
  EXPECT_NE(cache.Keys(1, 2, 0, 0, len).data, nullptr) << "reset: the row's own storage again";
}

TEST(KVCache, BytesPerTokenOfEachFormat) {
  const KVCacheShape s{60, 32, 8, 2048, 64};
  const double bf16 = KVBytesPerToken(s, KVDType::kBF16, ScaleMode::kTokenHead);
  EXPECT_LE(KVBytesPerToken(s, KVDType::kInt8, ScaleMode::kTokenHead) / bf16, 0.53);
  EXPECT_LE(KVBytesPerToken(s, KVDType::kFP8E4M3, ScaleMode::kTokenHead) / bf16, 0.53);
  EXPECT_LE(KVBytesPerToken(s, KVDType::kBFP8, ScaleMode::kTokenHead) / bf16, 0.54);
  EXPECT_EQ(KVBytesPerToken(s, KVDType::kInt8, ScaleMode::kTensor) / bf16, 0.5);
  EXPECT_THROW(KVRowBytes(KVDType::kBFP8, ScaleMode::kTokenHead, 24), Error);
  EXPECT_THROW(ParseKVDType("int4"), Error);
}

}  // namespace
}  // namespace wc
