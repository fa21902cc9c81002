// Speculative decoding's rollback (issue 34) seen in the KV cache itself: after a loop ran the same
// requests with and without speculation, every user row holds the same stored K/V bytes (scales
// included) for its positions [0, cur_pos), in every layer and KV head, on every KV format, paged
// and contiguous; a paged row holds as many blocks as one-token decoding left it, the pool's free
// and row-held counts are equal, and the prefix cache holds as much. A session's later turns read
// the rolled-back KV; a row that adopted another row's blocks from the prefix cache (shared,
// copy-on-write) leaves their bytes and references untouched while it speculates past them.
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serving/scripted_proposer.h"
#include "tests/serving/serving_loop_util.h"
#include "util/error.h"

namespace wc::test {
namespace {

// Raw stored bytes of row `user`'s positions [0, n): [n_layers][n_kv_heads][n][K row, V row], each
// row RowBytes() bytes as the format stores it (per-row scales inside it).
std::vector<uint8_t> RowImage(const KVCache& cache, int user, int n) {
  const KVCacheShape& s = cache.shape();
  const size_t rb = static_cast<size_t>(cache.RowBytes());
  std::vector<uint8_t> out;
  std::vector<uint8_t> k(rb), v(rb);  // [row_bytes] each
  for (int l = 0; l < s.n_layers; ++l)
    for (int h = 0; h < s.n_kv_heads; ++h)
      for (int pos = 0; pos < n; ++pos) {
        cache.CopyRows(l, user, h, pos, 1, k.data(), v.data());
        out.insert(out.end(), k.begin(), k.end());
        out.insert(out.end(), v.begin(), v.end());
      }
  return out;
}

// The blocks of a paged row, in position order ([user_blocks]).
std::vector<int> RowBlocks(const KVCache& cache, int user) {
  std::vector<int> blocks;
  for (int i = 0; i < cache.user_blocks(user); ++i)
    blocks.push_back(cache.user_block(user, i * cache.block_size()));
  return blocks;
}

// Every layer's K/V bytes of the given blocks, as stored: [blocks][block_bytes].
std::vector<uint8_t> BlockBytes(const KVCache& cache, const std::vector<int>& blocks) {
  std::vector<uint8_t> out(static_cast<size_t>(cache.block_bytes()) * blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i)
    cache.ReadBlock(blocks[i], out.data() + i * static_cast<size_t>(cache.block_bytes()));
  return out;
}

// What a run leaves: each request's outcome, and per session its row's image and block count.
struct RowState {
  int row = -1;
  int cur_pos = 0;
  std::vector<uint8_t> image;
  int blocks = 0;
};
struct RunState {
  std::vector<Outcome> outs;
  std::vector<RowState> rows;  // [sessions]
  int free_blocks = 0, row_blocks = 0, prefix_blocks = 0;
  int64_t prefix_hits = 0, prefix_cached_tokens = 0;
};

// The requests of one run, each in its own session (so its row keeps its KV after it ends):
//   A: three turns - the text that repeats itself (greedy, part of the proposals confirmed), then
//      a sampled and a greedy turn that read the KV the first turn's rollbacks left;
//   B: A's first prompt, sampled hot (proposals rejected): paged, it adopts A's full blocks
//      from the prefix cache and speculates past them;
//   C: a prompt that ends inside the model's own greedy loop (every proposal confirmed);
//   D: a plain text, greedy, where no proposal is confirmed;
//   E: a plain text sampled (part of the proposals confirmed);
//   F: greedy, the oracle proposing the model's own continuation up to and past an EOS: the EOS
//      is confirmed inside a verify chunk and ends the request there.
struct Plan {
  std::vector<std::vector<RequestSpec>> sessions;  // [session][turn]
};

// The text C starts from, and the first 100 tokens of the model's greedy continuation of it in
// this KV format (the continuation depends on it).
std::vector<int> LeadPrompt() {
  return TextPrompt(9, 400);
}
std::vector<int> LeadTokens(const KVCacheOptions& kv) {
  RequestSpec lead;
  lead.prompt = LeadPrompt();
  lead.sampling = Greedy();
  lead.max_new_tokens = 100;
  lead.stop_at_eos = false;
  return RunSolo({lead}, kv)[0].result.tokens;
}

// F's prompt and the model's greedy continuation of it, which ends at an EOS 6 tokens on: cut from
// the first of some text prompts whose greedy continuation (in this KV format, on this machine's
// kernels: it depends on both) reaches an EOS within 80 tokens. The oracle proposes the
// continuation and 8 tokens it never reaches.
struct EosLead {
  std::vector<int> prompt;
  std::vector<int> script;
};
EosLead FindEosLead(const KVCacheOptions& kv) {
  constexpr size_t kBeforeEos = 6;
  for (int i = 0; i < 16; ++i) {
    RequestSpec s;
    s.prompt = TextPrompt(9, 400 + 37 * i);
    s.sampling = Greedy();
    s.max_new_tokens = 80;
    const RequestResult r = RunSolo({s}, kv)[0].result;
    if (r.reason != StopReason::kEos || r.tokens.size() <= kBeforeEos) continue;
    const size_t cut = r.tokens.size() - kBeforeEos;
    EosLead lead;
    lead.prompt = s.prompt;
    lead.prompt.insert(lead.prompt.end(), r.tokens.begin(), r.tokens.begin() + cut);
    lead.script.assign(r.tokens.begin() + cut, r.tokens.end());
    for (int j = 0; j < 8; ++j) lead.script.push_back(lead.script[j % (kBeforeEos - 1)]);
    return lead;
  }
  ADD_FAILURE() << "no text prompt's greedy continuation reached an EOS in "
                << KVDTypeName(kv.dtype);
  return {};
}

Plan MakePlan(const std::vector<int>& lead, const EosLead& eos_lead, int k) {
  std::vector<int> repeated = TextPrompt(40, 3);
  const std::vector<int> again(repeated.begin() + 1, repeated.end());
  repeated.insert(repeated.end(), again.begin(), again.end());
  auto spec = [&](std::vector<int> prompt, SamplingParams sampling, uint64_t seed, int n) {
    RequestSpec s;
    s.prompt = std::move(prompt);
    s.sampling = sampling;
    s.seed = seed;
    s.max_new_tokens = n;
    s.stop_at_eos = false;
    s.speculate_k = k;
    return s;
  };
  auto later_turn = [](int n, int offset) {
    std::vector<int> p = TextPrompt(n + 1, offset);
    p.erase(p.begin());  // no BOS inside a conversation
    return p;
  };
  const SamplingParams warm{0.8f, 8, 0.95f}, hot{1.5f, 0, 1.0f};
  // C's prompt: the lead text and its 100 tokens, by then a loop the lookup proposes from.
  std::vector<int> looping = LeadPrompt();
  looping.insert(looping.end(), lead.begin(), lead.end());
  RequestSpec in_loop = spec(looping, Greedy(), 5, 20);
  in_loop.lookup_ngram = 8;  // a loop where a 3-gram is followed by different tokens (fp8-e5m2's)
  // F: the oracle proposes the continuation through its EOS, which is confirmed inside a verify
  // chunk and ends the request; the positions after it are rolled back for good (with blocks of
  // two positions, a block).
  RequestSpec ends = spec(eos_lead.prompt, Greedy(), 8, 20);
  ends.stop_at_eos = true;
  if (k > 0)
    ends.proposer_source = std::make_shared<ScriptedProposerSource>(
        eos_lead.script, 1.0, LoadDefaultModel().config().vocab_size);
  Plan plan;
  plan.sessions = {
      {spec(repeated, Greedy(), 1, 32), spec(later_turn(6, 50), warm, 2, 20),
       spec(later_turn(5, 200), Greedy(), 3, 20)},
      {spec(repeated, hot, 4, 24)},
      {in_loop},
      {spec(TextPrompt(12, 407), Greedy(), 6, 12)},
      {spec(TextPrompt(24, 100), warm, 7, 32)},
      {ends},
  };
  return plan;
}

RunState RunPlan(const KVCacheOptions& kv, const std::vector<int>& lead, const EosLead& eos_lead,
                 int k) {
  const Plan plan = MakePlan(lead, eos_lead, k);
  ServingOptions o = Rows(static_cast<int>(plan.sessions.size()));
  o.kv = kv;
  std::unique_ptr<ServingLoop> loop = MakeLoop(o);
  const KVCache& cache = loop->cache();
  RunState state;
  std::vector<SessionId> ids;
  std::vector<int> a_blocks;     // A's blocks once its turns ended (paged)
  std::vector<uint8_t> a_bytes;  // their bytes then
  std::vector<int> a_refs;       // and their references
  for (size_t s = 0; s < plan.sessions.size(); ++s) {
    ids.push_back(loop->OpenSession());
    RowState row;
    for (RequestSpec turn : plan.sessions[s]) {
      turn.session = ids.back();
      state.outs.push_back(RunOne(*loop, turn));
      const RequestResult& r = state.outs.back().result;
      EXPECT_TRUE(r.reason == StopReason::kMaxTokens || r.reason == StopReason::kEos) << r.error;
      row.row = r.user_row;
      // After max_new_tokens, the last token sampled is fed with the session's next turn: it is
      // not in the KV yet. An EOS is never fed.
      row.cur_pos = r.session_pos - (r.reason == StopReason::kMaxTokens ? 1 : 0);
    }
    state.rows.push_back(row);
    // The loop is idle between requests: its cache may be read.
    if (cache.paged() && s == 0) {
      a_blocks = RowBlocks(cache, row.row);
      a_bytes = BlockBytes(cache, a_blocks);
      for (int b : a_blocks) a_refs.push_back(cache.block_refs(b));
    }
    if (cache.paged() && s == 1) {
      // B took A's full blocks of their common prompt from the prefix cache and wrote past them.
      const std::vector<int> b_blocks = RowBlocks(cache, row.row);
      const size_t common = plan.sessions[1][0].prompt.size() / cache.block_size();
      EXPECT_GE(b_blocks.size(), common);
      EXPECT_GE(a_blocks.size(), common);
      for (size_t i = 0; i < common && i < b_blocks.size() && i < a_blocks.size(); ++i) {
        EXPECT_EQ(b_blocks[i], a_blocks[i]) << "block " << i;
        EXPECT_EQ(cache.block_refs(a_blocks[i]), a_refs[i] + 1) << "block " << i;
      }
      for (size_t i = common; i < a_blocks.size(); ++i)
        EXPECT_EQ(cache.block_refs(a_blocks[i]), a_refs[i]) << "block " << i;
      EXPECT_EQ(BlockBytes(cache, a_blocks), a_bytes) << "B's speculation wrote into A's blocks";
    }
  }
  loop->Shutdown(ShutdownMode::kDrain);  // sessions keep their rows; the cache is ours to read
  for (RowState& row : state.rows) {
    row.image = RowImage(cache, row.row, row.cur_pos);
    row.blocks = cache.user_blocks(row.row);
    if (cache.paged()) {
      EXPECT_EQ(row.blocks, cache.BlocksFor(row.cur_pos)) << "row " << row.row;
    }
  }
  if (cache.paged()) {
    EXPECT_EQ(BlockBytes(cache, a_blocks), a_bytes) << "A's blocks changed";
  }
  state.free_blocks = cache.free_blocks();
  state.row_blocks = cache.row_blocks();
  const ServingStatus st = loop->status();
  state.prefix_blocks = st.prefix_blocks;
  state.prefix_hits = st.prefix_hits;
  state.prefix_cached_tokens = st.prefix_cached_tokens;
  return state;
}

// Runs the plan without speculation and with k 1, 4 and 16, and compares what they leave.
void ExpectRollbackExact(const KVCacheOptions& kv) {
  const std::string layout = kv.block_size ? Cat("paged ", kv.block_size) : "contiguous";
  const std::vector<int> lead = LeadTokens(kv);
  const EosLead eos_lead = FindEosLead(kv);
  const RunState want = RunPlan(kv, lead, eos_lead, 0);
  if (kv.block_size) {
    EXPECT_GT(want.prefix_hits, 0) << "B took no blocks from the prefix cache";
  }
  for (int k : {1, 4, 16}) {
    const std::string label = Cat(KVDTypeName(kv.dtype), " ", layout, ", k ", k);
    const RunState got = RunPlan(kv, lead, eos_lead, k);
    ASSERT_EQ(got.outs.size(), want.outs.size());
    for (size_t i = 0; i < want.outs.size(); ++i)
      ExpectSameOutcome(want.outs[i], got.outs[i], Cat(label, ", request ", i));
    ASSERT_EQ(got.rows.size(), want.rows.size());
    for (size_t s = 0; s < want.rows.size(); ++s) {
      const RowState& w = want.rows[s];
      const RowState& g = got.rows[s];
      EXPECT_EQ(g.cur_pos, w.cur_pos) << label << ", session " << s;
      EXPECT_EQ(g.blocks, w.blocks) << label << ", session " << s;
      ASSERT_EQ(g.image.size(), w.image.size()) << label << ", session " << s;
      EXPECT_TRUE(g.image == w.image) << label << ", session " << s << ": K/V bytes differ";
    }
    EXPECT_EQ(got.free_blocks, want.free_blocks) << label;
    EXPECT_EQ(got.row_blocks, want.row_blocks) << label;
    EXPECT_EQ(got.prefix_blocks, want.prefix_blocks) << label;
    EXPECT_EQ(got.prefix_hits, want.prefix_hits) << label;
    EXPECT_EQ(got.prefix_cached_tokens, want.prefix_cached_tokens) << label;
    // The prompts did what they were built for. Requests: A's 3 turns, B, C, D, E.
    auto accepted = [&](size_t i) { return got.outs[i].result.spec_accepted; };
    auto proposed = [&](size_t i) { return got.outs[i].result.spec_proposed; };
    EXPECT_GT(accepted(0), 0) << label;
    EXPECT_LT(accepted(0), proposed(0)) << label;
    EXPECT_GT(proposed(3), 0) << label;
    EXPECT_LT(accepted(3), proposed(3))
        << label << ": B, sampled hot, had every proposal confirmed";
    EXPECT_GT(proposed(4), 0) << label;
    EXPECT_EQ(accepted(4), proposed(4)) << label << ": C, in the model's loop";
    EXPECT_GT(proposed(5), 0) << label;
    EXPECT_EQ(accepted(5), 0) << label << ": D";
    // E, sampled: proposals rejected (some confirmed too, unless its row backed off first).
    EXPECT_LT(accepted(6), proposed(6)) << label;
    EXPECT_EQ(got.outs[7].result.reason, StopReason::kEos) << label << ": F";
    EXPECT_GT(proposed(7), 0) << label << ": F";
  }
}

class RollbackFormats : public ::testing::TestWithParam<KVDType> {};

TEST_P(RollbackFormats, TheCacheHoldsTheBytesAndBlocksOfOneTokenDecoding) {
  for (int block_size : {0, 16}) ExpectRollbackExact(Kv(GetParam(), block_size));
}

// Blocks of two positions: every rollback that outlives its request - F's, whose EOS ends it in
// the middle of a verify chunk - frees a block, whatever the position it starts at.
TEST(Rollback, RowsOfSmallBlocksHoldOnlyTheBlocksOfOneTokenDecoding) {
  ExpectRollbackExact(Kv(KVDType::kBF16, 2));
}

INSTANTIATE_TEST_SUITE_P(EveryKVFormat, RollbackFormats,
                         ::testing::Values(KVDType::kF32, KVDType::kBF16, KVDType::kInt8,
                                           KVDType::kFP8E4M3, KVDType::kFP8E5M2, KVDType::kBFP8),
                         KVDTypeParamName);

}  // namespace
}  // namespace wc::test
