// Speculative decoding with a draft model (issue 34): the draft proposes its argmax on its own KV
// rows, the target verifies. Tokens and logits equal decoding without speculation - greedy and
// sampled, any KV format and k, batched - whether the draft agrees with the target (the default
// model drafting for itself: every greedy proposal kept) or not (a random draft); the draft's row
// follows the target's history across rejections, turns and requests.
#include <filesystem>

#include <gtest/gtest.h>

#include "model/random_checkpoint.h"
#include "serving/draft_proposer.h"
#include "tests/serving/serving_loop_util.h"

namespace wc::test {
namespace {

constexpr int kDraftRows = 16;  // at least every test loop's user rows

// The default model's own weights as the draft: greedy proposals are the target's own choices.
std::shared_ptr<DraftModelSource> SelfDraft(KVDType kv = KVDType::kBF16) {
  const DefaultModel& m = LoadDefaultModel();
  return std::make_shared<DraftModelSource>(
      *m.model, kDraftRows, m.config().max_position_embeddings, kv, m.tokenizer->piece_count());
}

// A one-layer random checkpoint with the default model's vocabulary: it rarely agrees.
const DecoderModel& RandomDraftModel() {
  static const std::unique_ptr<DecoderModel> model = [] {
    ModelConfig c = LoadDefaultModel().config();
    c.n_layers = 1;
    const std::string dir =
        (std::filesystem::temp_directory_path() / Cat("wc_draft_", getpid())).string();
    WriteRandomCheckpoint(c, DType::kBF16, 5, dir);
    std::unique_ptr<DecoderModel> loaded = DecoderModel::Load(dir, ModelOptions());
    std::filesystem::remove_all(dir);
    return loaded;
  }();
  return *model;
}
std::shared_ptr<DraftModelSource> RandomDraft() {
  const DefaultModel& m = LoadDefaultModel();
  return std::make_shared<DraftModelSource>(RandomDraftModel(), kDraftRows,
                                            m.config().max_position_embeddings, KVDType::kBF16,
                                            m.tokenizer->piece_count());
}

std::vector<RequestSpec> Specs(int k, const std::shared_ptr<ProposerSource>& source) {
  std::vector<RequestSpec> specs;
  int seed = 3;
  for (const std::vector<int>& prompt : {TextPrompt(30, 7), TextPrompt(12, 300)}) {
    for (bool greedy : {true, false}) {
      RequestSpec s;
      s.prompt = prompt;
      s.sampling = greedy ? Greedy() : SamplingParams{0.8f, 8, 0.95f};
      s.seed = static_cast<uint64_t>(seed++);
      s.max_new_tokens = 32;
      s.stop_at_eos = false;
      s.speculate_k = source ? k : 0;
      s.proposer_source = source;
      specs.push_back(s);
    }
  }
  return specs;
}

void ExpectAllSame(const std::vector<Outcome>& want, const std::vector<Outcome>& got,
                   const std::string& label) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ExpectSameOutcome(want[i], got[i], Cat(label, ", request ", i));
}

TEST(DraftModel, DraftingForItselfKeepsEveryGreedyProposalAndChangesNoToken) {
  const KVCacheOptions kv = Kv(KVDType::kBF16, 16);
  const std::vector<Outcome> want = RunSolo(Specs(0, nullptr), kv);
  for (int k : {1, 5, 16}) {
    const std::vector<Outcome> got = RunSolo(Specs(k, SelfDraft()), kv);
    ExpectAllSame(want, got, Cat("k ", k));
    for (size_t i = 0; i < got.size(); ++i) {
      const RequestResult& r = got[i].result;
      EXPECT_GT(r.spec_proposed, 0) << "request " << i;
      if (i % 2 == 0) {  // greedy: the draft's argmax is the target's, proposal for proposal
        EXPECT_EQ(r.spec_accepted, r.spec_proposed) << "k " << k << ", request " << i;
      }
    }
  }
}

TEST(DraftModel, ARandomDraftChangesNoTokenOnAnyFormatOrLayout) {
  for (KVDType dtype : {KVDType::kBF16, KVDType::kInt8, KVDType::kBFP8}) {
    for (int block_size : {0, 16}) {
      const KVCacheOptions kv = Kv(dtype, block_size);
      const std::vector<Outcome> want = RunSolo(Specs(0, nullptr), kv);
      for (int k : {2, 8}) {
        const std::string label =
            Cat(KVDTypeName(dtype), block_size ? " paged" : " contiguous", ", k ", k);
        const std::vector<Outcome> got = RunSolo(Specs(k, RandomDraft()), kv);
        ExpectAllSame(want, got, label);
        int proposed = 0, accepted = 0;
        for (const Outcome& o : got) {
          proposed += o.result.spec_proposed;
          accepted += o.result.spec_accepted;
        }
        EXPECT_GT(proposed, 0) << label;
        EXPECT_LT(accepted, proposed) << label;  // rejections happened, and were rolled back
      }
    }
  }
}

// Rows of one batch share the source, each drafting on its own row; several threads and a small
// token budget; speculating and plain rows mixed.
TEST(DraftModel, AnyBatchMixAndThreadCountGivesTheSameTokens) {
  const std::vector<Outcome> want = RunSolo(Specs(0, nullptr), Kv(KVDType::kBF16, 16));
  for (const BatchConfig& c : {BatchConfig{16, 4, 256, 2}, BatchConfig{0, 3, 9, 1}}) {
    for (const std::shared_ptr<DraftModelSource>& source : {SelfDraft(), RandomDraft()}) {
      std::vector<RequestSpec> specs = Specs(4, source);
      specs[1].speculate_k = 0;
      ExpectAllSame(want, RunBatched(specs, KVDType::kBF16, c), Describe(c));
    }
  }
}

// The draft's row keeps what matches the new history and feeds only the rest: proposals after a
// rejection, a changed history or a shorter one are those of a fresh draft row.
TEST(DraftModel, ARowFollowsAnyHistoryAsAFreshRowWould) {
  const std::vector<int> a = TextPrompt(40, 11);
  std::vector<int> mixed(a.begin(), a.begin() + 25);  // shares 25 tokens, then differs
  mixed.push_back(a[25] == 9 ? 10 : 9);
  mixed.insert(mixed.end(), a.begin() + 30, a.end());
  const std::vector<int>& b = mixed;
  const std::vector<int> c(a.begin(), a.begin() + 12);  // shorter
  std::shared_ptr<DraftModelSource> reused = RandomDraft();
  int64_t fresh_fed = 0;
  for (const std::vector<int>* history : {&a, &b, &c, &a, &b}) {
    const std::vector<int> got = reused->Draft(2, *history, 6);
    std::shared_ptr<DraftModelSource> fresh = RandomDraft();
    EXPECT_EQ(got, fresh->Draft(2, *history, 6)) << "history of " << history->size() << " tokens";
    EXPECT_EQ(got.size(), 6u);
    fresh_fed += fresh->tokens_fed();
  }
  // The reused row fed less than fresh rows did (only what did not match).
  EXPECT_LT(reused->tokens_fed(), fresh_fed);
}

// A target whose padded vocabulary produced an id the draft lacks: no proposals from then on,
// never an error; proposals are only ever ids of the tokenizer.
TEST(DraftModel, ProposesNothingAfterAnIdTheDraftCannotRead) {
  std::shared_ptr<DraftModelSource> source = RandomDraft();
  const int pieces = LoadDefaultModel().tokenizer->piece_count();
  std::unique_ptr<Proposer> proposer = source->Make(1);
  proposer->Reset(TextPrompt(10, 50));
  const std::vector<int> drafted = proposer->Propose(8);
  ASSERT_EQ(drafted.size(), 8u);
  for (int t : drafted) EXPECT_LT(t, pieces);
  proposer->Append(source->draft_vocab() + 3);
  EXPECT_TRUE(proposer->Propose(8).empty());
  proposer->Append(5);
  EXPECT_TRUE(proposer->Propose(8).empty());
  proposer->Reset(TextPrompt(10, 50));  // a new request on the row reads again
  EXPECT_EQ(proposer->Propose(8), drafted);
}

}  // namespace
}  // namespace wc::test
