// PartialSums (model/partial_sums.h), the tensor-parallel steps of a layer: the whole model's
// trivial case, and on a thread group the sum in rank order with the deferred biases after it, the
// vote carried as integers (rank 0's interrupt stops every rank at the same sum; any rank's K/V
// write error makes every rank throw the first such rank's error).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "dist/communicator.h"
#include "dist/thread_group.h"
#include "model/partial_sums.h"
#include "util/error.h"

namespace wc {
namespace {

// What each rank's Sum did: "ok", "interrupted" or the error's message, [ranks].
template <typename Body>
std::vector<std::string> OnRanks(int ranks, Body body) {
  auto group = MakeThreadGroup(ranks);
  std::vector<std::string> outcome(static_cast<size_t>(ranks), "ok");
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        body(*group[static_cast<size_t>(r)]);
      } catch (const PartialSums::Interrupted&) {
        outcome[static_cast<size_t>(r)] = "interrupted";
      } catch (const Error& e) {
        outcome[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return outcome;
}

TEST(PartialSums, TheWholeModelIsTheTrivialCase) {
  bool fire = false;
  const PartialSums::Interrupt interrupt = [&fire] { return fire; };
  PartialSums sums(nullptr, interrupt);
  const std::vector<float> bias = {1, 2}, none;
  EXPECT_EQ(sums.OwnBias(bias), bias.data());  // the matmul adds it
  EXPECT_EQ(sums.OwnBias(none), nullptr);
  EXPECT_TRUE(static_cast<bool>(sums.matmul_interrupt()));
  std::vector<float> out = {5, 6, 7, 8};
  sums.Sum(out, {&bias});
  EXPECT_EQ(out, (std::vector<float>{5, 6, 7, 8}));  // whole already
  EXPECT_THROW(sums.TryWrite([] { throw Error("disk full"); }), Error);
  EXPECT_FALSE(sums.failed());
  sums.Poll();
  fire = true;
  EXPECT_THROW(sums.Poll(), PartialSums::Interrupted);
}

TEST(PartialSums, RanksSumInRankOrderThenAddTheDeferredBiases) {
  const auto outcome = OnRanks(3, [](Communicator& c) {
    const PartialSums::Interrupt none;
    PartialSums sums(&c, none);
    const std::vector<float> b1 = {100, 200}, b2 = {0.5f, 0.25f}, empty;
    WC_CHECK(sums.OwnBias(b1) == nullptr && !sums.matmul_interrupt(), "a rank defers");
    sums.Poll();  // nothing between layers
    const float r = static_cast<float>(c.rank());
    std::vector<float> out = {r, 10 * r, 0.1f * r, 1};  // [2 tokens, hidden 2]
    sums.Sum(out, {&b1, &empty, &b2});
    const std::vector<float> want = {(3.0f + 100) + 0.5f, (30.0f + 200) + 0.25f,
                                     (((0.0f + 0.1f) + 0.2f) + 100) + 0.5f, (3.0f + 200) + 0.25f};
    WC_CHECK(out == want, "sum then biases");
    WC_CHECK(c.reduce_stats().calls == 1, "one collective a sum");
  });
  EXPECT_EQ(outcome, (std::vector<std::string>{"ok", "ok", "ok"}));
}

TEST(PartialSums, RankZerosInterruptStopsEveryRankAtTheSameSum) {
  const auto outcome = OnRanks(3, [](Communicator& c) {
    int polls = 0;
    const PartialSums::Interrupt rank0 = [&polls] { return ++polls == 2; }, none;
    PartialSums sums(&c, c.rank() == 0 ? rank0 : none);
    std::vector<float> out(4, 1.0f);
    sums.Sum(out, {});  // polls == 1: goes on
    sums.Sum(out, {});  // fires
    WC_CHECK(false, "past the interrupt");
  });
  EXPECT_EQ(outcome, (std::vector<std::string>{"interrupted", "interrupted", "interrupted"}));
}

TEST(PartialSums, AnyRanksWriteErrorIsEveryRanksFirstFailingRanksError) {
  const auto outcome = OnRanks(3, [](Communicator& c) {
    const PartialSums::Interrupt fires = [] { return true; }, none;
    PartialSums sums(&c, c.rank() == 0 ? fires : none);  // the error wins over the interrupt
    const bool ok = sums.TryWrite([&c] {
      if (c.rank() > 0) throw Error(Cat("non-finite K on rank ", c.rank()));
    });
    WC_CHECK(ok == (c.rank() == 0) && sums.failed() == !ok, "held for the vote");
    std::vector<float> out(4, 1.0f);
    sums.Sum(out, {});
  });
  EXPECT_EQ(outcome, (std::vector<std::string>(3, "rank 1: non-finite K on rank 1")));
}

}  // namespace
}  // namespace wc
