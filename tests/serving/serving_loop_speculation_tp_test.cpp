// Speculative decoding under tensor parallel (issue 34): the serving loop on rank 0 of a 2-rank
// thread group (dist/thread_group.h) runs speculating requests - greedy and sampled, prompts that
// confirm part of their proposals, paged KV with the prefix cache - and gets the tokens of one
// rank without speculation. The verify chunk is one more step rank 0 announces; its rollback
// reaches the follower as a journaled kTruncate: after every step the follower's block tables and
// pool are rank 0's, and its own KV heads hold, for every position kept, the bytes they hold
// without speculation.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dist/thread_group.h"
#include "model/tensor_parallel.h"
#include "tests/serving/serving_loop_util.h"
#include "util/error.h"

namespace wc::test {
namespace {

// A cache's block bookkeeping after a step: every row's blocks, the free and row-held counts.
struct Tables {
  std::vector<std::vector<int>> rows;  // [user_rows][blocks]
  int free_blocks = 0, row_blocks = 0;
  bool operator==(const Tables& o) const {
    return rows == o.rows && free_blocks == o.free_blocks && row_blocks == o.row_blocks;
  }
};

Tables TablesOf(const KVCache& cache) {
  Tables t;
  for (int u = 0; u < cache.shape().user_rows; ++u) {
    std::vector<int> blocks;
    for (int i = 0; i < cache.user_blocks(u); ++i)
      blocks.push_back(cache.user_block(u, i * cache.block_size()));
    t.rows.push_back(std::move(blocks));
  }
  t.free_blocks = cache.free_blocks();
  t.row_blocks = cache.row_blocks();
  return t;
}

// Raw stored K/V bytes of the positions a row's blocks hold, per (layer, KV head):
// [n_layers * n_kv_heads][positions][K row, V row].
using Image = std::vector<std::vector<uint8_t>>;

// Every row's Image, [user_rows].
std::vector<Image> Images(const KVCache& cache) {
  const KVCacheShape& s = cache.shape();
  const size_t rb = static_cast<size_t>(cache.RowBytes());
  std::vector<uint8_t> k(rb), v(rb);  // [row_bytes] each
  std::vector<Image> out;
  for (int u = 0; u < s.user_rows; ++u) {
    Image image;
    const int n = cache.user_blocks(u) * cache.block_size();
    for (int l = 0; l < s.n_layers; ++l)
      for (int h = 0; h < s.n_kv_heads; ++h) {
        std::vector<uint8_t> rows;
        for (int pos = 0; pos < n; ++pos) {
          cache.CopyRows(l, u, h, pos, 1, k.data(), v.data());
          rows.insert(rows.end(), k.begin(), k.end());
          rows.insert(rows.end(), v.begin(), v.end());
        }
        image.push_back(std::move(rows));
      }
    out.push_back(std::move(image));
  }
  return out;
}

// The requests: a text that repeats itself (greedy) and a plain text (sampled), each in its own
// session so its row keeps its KV; lookup confirms part of their proposals.
std::vector<RequestSpec> TpSpecs(int k) {
  std::vector<int> repeated = TextPrompt(40, 3);
  const std::vector<int> again(repeated.begin() + 1, repeated.end());
  repeated.insert(repeated.end(), again.begin(), again.end());
  std::vector<RequestSpec> specs(2);
  specs[0].prompt = repeated;
  specs[0].sampling = Greedy();
  specs[1].prompt = TextPrompt(24, 100);
  specs[1].sampling = SamplingParams{0.8f, 8, 0.95f};
  for (size_t i = 0; i < specs.size(); ++i) {
    specs[i].seed = 21 + i;
    specs[i].max_new_tokens = 32;
    specs[i].stop_at_eos = false;
    specs[i].speculate_k = k;
  }
  return specs;
}

KVCacheOptions Paged() {
  KVCacheOptions kv;
  kv.dtype = KVDType::kBF16;
  kv.block_size = 16;
  return kv;
}

struct GroupRun {
  std::vector<Outcome> outs;
  std::vector<Tables> leader, follower;  // after each step's forward pass, [steps]
  std::vector<Image> follower_images;    // after the last step, [user_rows]
  size_t follower_row_bytes = 0;         // bytes of one stored K (or V) row of rank 1's
};

// The specs on a 2-rank group: rank 0's serving loop runs them one after another, each in its own
// session; rank 1 follows.
GroupRun RunOnTwoRanks(const std::vector<RequestSpec>& specs) {
  const std::string dir = std::string(WORMCHAT_ASSETS_DIR) + "/default-model";
  const DefaultModel& whole = LoadDefaultModel();  // its tokenizer and chat format
  auto group = MakeThreadGroup(2);
  GroupRun run;
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        ModelOptions o;
        o.tensor_group = group[static_cast<size_t>(r)].get();
        auto model = DecoderModel::Load(dir, o);
        if (r != 0) {
          FollowSteps(*model, [&run](const KVCache& cache) {
            run.follower.push_back(TablesOf(cache));
            run.follower_images = Images(cache);
            run.follower_row_bytes = static_cast<size_t>(cache.RowBytes());
            EXPECT_EQ(cache.shape().n_kv_heads, 1);  // of the model's 2
          });
          return;
        }
        ServingOptions so = Rows(static_cast<int>(specs.size()));
        so.kv = Paged();
        so.kv.journal = true;  // rank 0's row operations, replayed by rank 1
        so.check_block_counts = true;
        ServingLoop loop(*model, whole.tokenizer.get(), whole.chat_format, so);
        const int last_layer = model->config().n_layers - 1;
        // Rank 0's cache once the step's K/V is written, before its rows sample (and roll back).
        model->set_attention_observer([&](int layer, const float*, int64_t) {
          if (layer == last_layer) run.leader.push_back(TablesOf(loop.cache()));
        });
        for (RequestSpec spec : specs) {
          spec.session = loop.OpenSession();
          run.outs.push_back(RunOne(loop, spec));
        }
        loop.Shutdown(ShutdownMode::kDrain);
        model->set_attention_observer(nullptr);
        model->StopFollowers();
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        group[static_cast<size_t>(r)]->Abort(1);
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  return run;
}

TEST(SpeculationTensorParallel, TwoRanksGiveOneRanksTokensAndTheFollowerRollsBackToo) {
  const std::vector<Outcome> one = RunSolo(TpSpecs(0), Paged());
  const GroupRun off = RunOnTwoRanks(TpSpecs(0));
  for (int k : {4, 16}) {
    const GroupRun on = RunOnTwoRanks(TpSpecs(k));
    ASSERT_EQ(on.outs.size(), one.size());
    int accepted = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      const RequestResult& r = on.outs[i].result;
      // The tokens of one rank without speculation (the ranks' partial sums round differently
      // from one rank's, so logits are compared with the group's own run without speculation).
      EXPECT_EQ(r.tokens, one[i].result.tokens) << "k " << k << ", request " << i;
      EXPECT_EQ(r.text, one[i].result.text) << "k " << k << ", request " << i;
      ExpectSameOutcome(off.outs[i], on.outs[i], Cat("2 ranks, k ", k, ", request ", i));
      EXPECT_LT(r.spec_accepted, r.spec_proposed) << "k " << k << ", request " << i;
      accepted += r.spec_accepted;
    }
    EXPECT_GT(accepted, 0) << "k " << k << ": no proposal was confirmed";
    // Every step rank 0 ran, rank 1 ran on the same block tables: the rollbacks reached it.
    ASSERT_EQ(on.follower.size(), on.leader.size()) << "k " << k;
    EXPECT_LT(on.leader.size(), off.leader.size()) << "k " << k << ": no step verified a proposal";
    for (size_t s = 0; s < on.leader.size(); ++s)
      EXPECT_TRUE(on.follower[s] == on.leader[s]) << "k " << k << ", step " << s;
    // Rank 1's KV heads hold the bytes they hold without speculation at every position kept.
    ASSERT_EQ(on.follower_images.size(), TpSpecs(k).size());
    ASSERT_EQ(off.follower_images.size(), TpSpecs(k).size());
    for (size_t i = 0; i < on.outs.size(); ++i) {
      const int row = on.outs[i].result.user_row;
      ASSERT_EQ(row, off.outs[i].result.user_row);
      const size_t kept = static_cast<size_t>(on.outs[i].result.session_pos - 1);
      const Image& got = on.follower_images[static_cast<size_t>(row)];
      const Image& want = off.follower_images[static_cast<size_t>(row)];
      ASSERT_EQ(got.size(), want.size());
      const size_t bytes = kept * 2 * on.follower_row_bytes;
      for (size_t lh = 0; lh < got.size(); ++lh) {
        ASSERT_GE(got[lh].size(), bytes);
        ASSERT_GE(want[lh].size(), bytes);
        EXPECT_TRUE(std::equal(got[lh].begin(), got[lh].begin() + bytes, want[lh].begin()))
            << "k " << k << ", request " << i << ", (layer, head) " << lh
            << ": rank 1's K/V differ";
      }
    }
  }
}

}  // namespace
}  // namespace wc::test
