// The serving loop's prefix cache (serving/serving_loop_prefix.cpp, kvcache/prefix_cache.h):
// requests that share a prompt's head take its full blocks from the cache instead of prefilling
// them, and produce bit-identical tokens, logits and beam scores to the cache off, for every KV
// format and block size; only full blocks are taken and at least the last prompt token is
// computed; a small pool evicts unused cached blocks and still admits everything; a session
// re-prefilled from its start reuses its own earlier blocks; requests submitted together compute a
// shared head once; admission counts shared blocks once.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "tests/sanitized.h"
#include "tests/serving/serving_loop_util.h"
#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

using test::Outcome;
using test::RequestSpec;

// Requests sharing a `shared`-token head (the same text), each with its own tail, some sampled.
std::vector<RequestSpec> SharedHead(int shared, int n) {
  std::vector<RequestSpec> specs;
  for (int i = 0; i < n; ++i) {
    RequestSpec s;
    s.prompt = test::TextPrompt(shared);
    const std::vector<int> tail = test::TextPrompt(1 + 5 + 3 * i, 300 + 17 * i);
    s.prompt.insert(s.prompt.end(), tail.begin() + 1, tail.end());  // the tail without its bos
    s.max_new_tokens = 6;
    s.stop_at_eos = false;
    if (i % 2 == 1) {
      s.sampling.temperature = 0.9f;
      s.sampling.top_k = 40;
      s.seed = 1000 + i;
    } else {
      s.sampling = test::Greedy();
    }
    specs.push_back(std::move(s));
  }
  return specs;
}

// `specs` one after another in a loop of `rows` rows (so each request finds the blocks of the ones
// before it cached), the cache on or off.
std::vector<Outcome> RunInOrder(const std::vector<RequestSpec>& specs, KVCacheOptions kv,
                                bool prefix_cache, int rows = 1) {
  ServingOptions o = test::Rows(rows);
  o.kv = kv;
  o.prefix_cache = prefix_cache;
  auto loop = test::MakeLoop(o);
  std::vector<Outcome> out;
  for (const RequestSpec& s : specs) out.push_back(test::RunOne(*loop, s));
  // Only the cache holds blocks between requests (the status is updated after the step).
  EXPECT_TRUE(test::WaitUntil([&] { return loop->status().kv_blocks_used == 0; }));
  if (!prefix_cache) {
    EXPECT_EQ(loop->status().prefix_blocks, 0);
  }
  return out;
}

TEST(ServingLoopPrefix, SharedHeadsAreBitIdenticalWithTheCacheOnAndOff) {
  const std::vector<RequestSpec> specs = SharedHead(100, 5);
  for (KVDType dtype : {KVDType::kBF16, KVDType::kF32, KVDType::kInt8, KVDType::kFP8E4M3,
                        KVDType::kFP8E5M2, KVDType::kBFP8}) {
    for (int block_size : {16, 64}) {
      const std::string label = Cat(KVDTypeName(dtype), ", blocks of ", block_size);
      SCOPED_TRACE(label);
      KVCacheOptions kv;
      kv.dtype = dtype;
      kv.block_size = block_size;
      const std::vector<Outcome> off = RunInOrder(specs, kv, false);
      const std::vector<Outcome> on = RunInOrder(specs, kv, true);
      for (size_t i = 0; i < specs.size(); ++i) {
        test::ExpectSameOutcome(off[i], on[i], Cat(label, ", request ", i));
        EXPECT_EQ(off[i].result.cached_tokens, 0);
        EXPECT_EQ(on[i].result.prompt_tokens, off[i].result.prompt_tokens);
        // The first computes everything; the others take the shared head's full blocks.
        EXPECT_EQ(on[i].result.cached_tokens, i == 0 ? 0 : 100 / block_size * block_size) << i;
      }
    }
  }
}

// Only full blocks, and never the prompt's last token: a prompt that is exactly a cached run of
// blocks recomputes its last block, so its first logits are computed as without the cache.
TEST(ServingLoopPrefix, TakesFullBlocksAndLeavesTheLastTokenToCompute) {
  KVCacheOptions kv;
  kv.block_size = 16;
  RequestSpec a;
  a.prompt = test::TextPrompt(64);  // exactly 4 blocks
  a.sampling = test::Greedy();
  a.max_new_tokens = 4;
  a.stop_at_eos = false;
  RequestSpec b = a;
  b.prompt.resize(40);  // 2.5 blocks of a's
  const std::vector<Outcome> off = RunInOrder({a, a, b}, kv, false);
  const std::vector<Outcome> on = RunInOrder({a, a, b}, kv, true);
  for (int i = 0; i < 3; ++i) test::ExpectSameOutcome(off[i], on[i], Cat("request ", i));
  EXPECT_EQ(on[1].result.cached_tokens, 48);  // 3 of 4 blocks: the 64th token is computed
  EXPECT_EQ(on[2].result.cached_tokens, 32);  // 2 full blocks; the half block is computed
}

// Beams share a prompt that itself came from the cache.
TEST(ServingLoopPrefix, BeamsOverACachedPromptAreBitIdentical) {
  KVCacheOptions kv;
  kv.block_size = 16;
  RequestSpec greedy = SharedHead(70, 1)[0];
  RequestSpec beam = greedy;
  beam.beams = BeamParams{};
  beam.beams->num_beams = 3;
  beam.beams->num_return = 2;
  const std::vector<Outcome> off = RunInOrder({greedy, beam}, kv, false, 3);
  const std::vector<Outcome> on = RunInOrder({greedy, beam}, kv, true, 3);
  test::ExpectSameOutcome(off[1], on[1], "beams");
  EXPECT_EQ(on[1].result.cached_tokens, 64);
}

// A pool too small to keep everything: unused cached blocks are evicted least recently used first,
// every request is admitted and runs as with the cache off.
TEST(ServingLoopPrefix, ASmallPoolEvictsAndAdmitsEverything) {
  KVCacheOptions kv;
  kv.block_size = 16;
  kv.n_blocks = 12;  // about two requests' worth
  std::vector<RequestSpec> specs;
  for (int i = 0; i < 6; ++i) {
    RequestSpec s;
    s.prompt = test::TextPrompt(60, 40 * i);  // distinct heads
    s.sampling = test::Greedy();
    s.max_new_tokens = 8;
    s.stop_at_eos = false;
    specs.push_back(s);
  }
  specs.push_back(specs[5]);  // the most recent one again: still cached
  const std::vector<Outcome> off = RunInOrder(specs, kv, false);
  ServingOptions o = test::Rows(1);
  o.kv = kv;
  auto loop = test::MakeLoop(o);
  for (size_t i = 0; i < specs.size(); ++i) {
    const Outcome got = test::RunOne(*loop, specs[i]);
    test::ExpectSameOutcome(off[i], got, Cat("request ", i));
    EXPECT_EQ(got.result.reason, off[i].result.reason);
  }
  ASSERT_TRUE(test::WaitUntil([&] { return loop->status().kv_blocks_used == 0; }));
  const ServingStatus st = loop->status();
  EXPECT_GT(st.prefix_evictions, 0);
  EXPECT_EQ(st.prefix_hits, 1);
  EXPECT_EQ(st.prefix_cached_tokens, 48);
  EXPECT_LE(st.prefix_blocks, kv.n_blocks);
  EXPECT_EQ(st.kv_blocks_used, 0);
}

// Several rows at once: the first request computes the shared head; the others, submitted with
// it, wait for its blocks rather than computing them again, then take them; every outcome matches
// the cache off.
TEST(ServingLoopPrefix, RequestsWaitForAHeadBeingPrefilledAndComputeItOnce) {
  KVCacheOptions kv;
  kv.block_size = 16;
  const std::vector<RequestSpec> specs = SharedHead(80, 8);
  const std::vector<Outcome> off = RunInOrder(specs, kv, false);
  for (int rows : {4, 8}) {
    SCOPED_TRACE(Cat(rows, " rows"));
    ServingOptions o = test::Rows(rows);
    o.kv = kv;
    o.max_batch_tokens = 32;  // the head takes several steps to prefill
    auto loop = test::MakeLoop(o);
    std::vector<std::shared_ptr<WaitingObserver>> waits;
    for (const RequestSpec& s : specs) waits.push_back(test::Submit(*loop, s));
    int64_t prompt_tokens = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
      const Outcome got = test::Await(*waits[i]);
      test::ExpectSameOutcome(off[i], got, Cat("request ", i));
      EXPECT_EQ(got.result.cached_tokens, i == 0 ? 0 : 80) << i;
      prompt_tokens += got.result.prompt_tokens;
    }
    ASSERT_TRUE(test::WaitUntil([&] { return loop->status().kv_blocks_used == 0; }));
    const ServingStatus st = loop->status();
    // The head's 80 tokens computed once, then each request's own tail.
    EXPECT_EQ(st.tokens_prefilled, prompt_tokens - 80 * (static_cast<int64_t>(specs.size()) - 1));
    EXPECT_EQ(st.prefix_hits, static_cast<int64_t>(specs.size()) - 1);
  }
}

// Admission counts only the blocks a request must newly allocate: a request whose head another
// running request holds fits beside it in a pool too small for two unshared requests.
TEST(ServingLoopPrefix, SharedBlocksAreCountedOnceByAdmission) {
  KVCacheOptions kv;
  kv.block_size = 16;
  std::vector<RequestSpec> specs = SharedHead(64, 2);  // 4 shared blocks each
  for (RequestSpec& s : specs) s.max_new_tokens = 24;
  // Each needs 4 blocks of head + 2 for its tail and reply: 12 unshared, 8 shared.
  kv.n_blocks = 9;
  ServingOptions o = test::Rows(2);
  o.kv = kv;
  o.prefix_cache = false;
  std::vector<Outcome> apart;
  {
    auto loop = test::MakeLoop(o);
    std::vector<std::shared_ptr<WaitingObserver>> waits;
    for (const RequestSpec& s : specs) waits.push_back(test::Submit(*loop, s));
    for (auto& w : waits) apart.push_back(test::Await(*w));
  }
  // Without the cache the second waits for the first to end.
  EXPECT_GE(apart[1].result.t_admit, apart[0].result.t_finish);
  o.prefix_cache = true;
  auto loop = test::MakeLoop(o);
  std::vector<std::shared_ptr<WaitingObserver>> waits;
  for (const RequestSpec& s : specs) waits.push_back(test::Submit(*loop, s));
  std::vector<Outcome> shared;
  for (auto& w : waits) shared.push_back(test::Await(*w));
  for (size_t i = 0; i < specs.size(); ++i)
    test::ExpectSameOutcome(apart[i], shared[i], Cat("request ", i));
  EXPECT_EQ(shared[1].result.cached_tokens, 64);
  // With it, the second runs beside the first, on the first's blocks.
  EXPECT_LT(shared[1].result.t_admit, shared[0].result.t_finish);
  EXPECT_LE(loop->status().kv_blocks_peak, kv.n_blocks);
}

// --prefix-cache-dir: a later loop over the same directory maps the blocks in instead of
// prefilling them - bit-identical, for every KV format; damaged files are ignored, warned about and
// rewritten; another KV format finds nothing of them.
TEST(ServingLoopPrefix, PersistedBlocksAreMappedInByTheNextLoop) {
  const std::vector<RequestSpec> specs = SharedHead(100, 3);
  std::vector<KVDType> dtypes = {KVDType::kBF16,    KVDType::kF32,     KVDType::kInt8,
                                 KVDType::kFP8E4M3, KVDType::kFP8E5M2, KVDType::kBFP8};
  // One format in a sanitizer build (tools/tsan.sh runs this test): the store's writer thread
  // meets the loop's the same way for every format, and six took 200 s under TSan.
  if (test::kSanitized) dtypes.resize(1);
  for (KVDType dtype : dtypes) {
    SCOPED_TRACE(KVDTypeName(dtype));
    KVCacheOptions kv;
    kv.dtype = dtype;
    kv.block_size = 16;
    const std::vector<Outcome> off = RunInOrder(specs, kv, false);
    const std::string dir = ::testing::TempDir() + Cat("wormchat_persisted_", KVDTypeName(dtype));
    std::filesystem::remove_all(dir);
    std::mutex mu;
    std::vector<std::string> warnings;
    auto run = [&](KVCacheOptions kv_run) {
      ServingOptions o = test::Rows(1);
      o.kv = kv_run;
      o.prefix_cache_dir = dir;
      o.prefix_cache_key = "test model";
      o.prefix_cache_warn = [&](const std::string& m) {
        std::lock_guard<std::mutex> lock(mu);
        warnings.push_back(m);
      };
      auto loop = test::MakeLoop(o);
      std::vector<Outcome> out;
      for (const RequestSpec& sp : specs) out.push_back(test::RunOne(*loop, sp));
      EXPECT_TRUE(test::WaitUntil([&] { return loop->status().kv_blocks_used == 0; }));
      // The files are written by the store's own thread: Shutdown waits for what is queued, so
      // the counts are final (read before it, a loaded machine could show none saved yet).
      loop->Shutdown(ShutdownMode::kDrain);
      const ServingStatus st = loop->status();
      return std::make_pair(out, st);
    };
    auto expect_same = [&](const std::vector<Outcome>& got, const std::string& label) {
      for (size_t i = 0; i < specs.size(); ++i)
        test::ExpectSameOutcome(off[i], got[i], Cat(label, ", request ", i));
    };
    const auto [first, st1] = run(kv);
    expect_same(first, "first run");
    EXPECT_EQ(first[0].result.cached_tokens, 0);
    EXPECT_GT(st1.prefix_disk_saved, 0);
    EXPECT_EQ(st1.prefix_disk_loaded, 0);
    // The next run takes the head from the files, its first request included.
    const auto [second, st2] = run(kv);
    expect_same(second, "second run");
    for (const Outcome& o : second) EXPECT_EQ(o.result.cached_tokens, 96);
    EXPECT_EQ(st2.prefix_disk_loaded, 6);
    EXPECT_LT(st2.tokens_prefilled, st1.tokens_prefilled);
    EXPECT_TRUE(warnings.empty());
    // Another KV format keys other files: nothing is loaded.
    KVCacheOptions other = kv;
    other.dtype = dtype == KVDType::kBF16 ? KVDType::kInt8 : KVDType::kBF16;
    EXPECT_EQ(run(other).second.prefix_disk_loaded, 0);
    // Every file damaged: ignored with a warning each, computed again, rewritten.
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      std::filesystem::resize_file(e.path(), std::filesystem::file_size(e.path()) - 1);
      ++files;
    }
    const auto [third, st3] = run(kv);
    expect_same(third, "damaged files");
    EXPECT_EQ(third[0].result.cached_tokens, 0);
    EXPECT_EQ(st3.prefix_disk_loaded, 0);
    EXPECT_GT(st3.prefix_disk_ignored, 0);
    EXPECT_EQ(static_cast<int64_t>(warnings.size()), st3.prefix_disk_ignored);
    EXPECT_LE(static_cast<int>(warnings.size()), files);
    const auto [fourth, st4] = run(kv);
    expect_same(fourth, "rewritten");
    EXPECT_EQ(st4.prefix_disk_loaded, 6);
    std::filesystem::remove_all(dir);
  }
}

// Bad --prefix-cache-dir settings end the loop's construction with a one-line error.
TEST(ServingLoopPrefix, ABadCacheDirectoryIsAnErrorAtStart) {
  const test::TempDir tmp;
  const std::string file = tmp.File("not_a_dir");
  std::ofstream(file) << "x";
  auto expect_error = [&](ServingOptions o, const std::string& want) {
    try {
      test::MakeLoop(o);
      ADD_FAILURE() << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  ServingOptions o = test::Rows(1);
  o.prefix_cache_dir = file + "/sub";
  expect_error(o, "--prefix-cache-dir " + file + "/sub: cannot create it");
  o.prefix_cache_dir = tmp.File("ok_dir");
  o.prefix_cache = false;
  expect_error(o, "needs --prefix-cache on");
  o.prefix_cache = true;
  o.kv.block_size = 0;
  expect_error(o, "needs the paged KV cache");
}

}  // namespace
}  // namespace wc
