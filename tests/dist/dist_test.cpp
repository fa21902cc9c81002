// dist/ without mpirun: World() is a single process, and every collective is a copy; a thread
// group's ranks meet in shared memory (collectives, variable-size messages, a rank that never
// comes).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "dist/communicator.h"
#include "dist/exchange.h"
#include "dist/thread_group.h"
#include "util/error.h"

namespace wc {
namespace {

TEST(Communicator, OutsideMpirunTheWorldIsOneProcess) {
  Communicator& w = World();
  EXPECT_EQ(w.rank(), 0);
  EXPECT_EQ(w.size(), 1);
  EXPECT_EQ(w.Describe(), "single process");
  std::vector<float> x = {1.5f, -2.0f, 3.25f};
  w.AllReduceSum(x.data(), x.size());
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  std::vector<float> out(3);
  w.AllGather(x.data(), x.size() * sizeof(float), out.data());
  EXPECT_EQ(out, x);
  int v = 7;
  w.Broadcast(&v, sizeof v, 0);
  EXPECT_EQ(v, 7);
  w.Barrier();
}

// Runs body(rank's communicator) on `ranks` threads; the errors they threw, [ranks].
template <typename Body>
std::vector<std::string> OnThreads(int ranks, Body body, double timeout_s = 60) {
  auto group = MakeThreadGroup(ranks);
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    group[static_cast<size_t>(r)]->set_timeout_seconds(timeout_s);
    threads.emplace_back([&, r] {
      try {
        body(*group[static_cast<size_t>(r)]);
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

TEST(ThreadGroup, CollectivesAgreeOnEveryRank) {
  const int n = 3;
  const auto errors = OnThreads(n, [](Communicator& c) {
    const int r = c.rank();
    for (int round = 0; round < 50; ++round) {  // buffers reused round after round
      const int mine[2] = {r, round};
      std::vector<int> all(2 * n);
      c.AllGather(mine, sizeof mine, all.data());
      for (int i = 0; i < n; ++i) WC_CHECK(all[2 * i] == i && all[2 * i + 1] == round, "gather");
      double v = r == 2 ? 0.5 * round : -1;
      c.Broadcast(&v, sizeof v, 2);
      WC_CHECK(v == 0.5 * round, "broadcast");
      std::vector<float> x(100);
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * i + r + round);
      c.AllReduceSum(x.data(), x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        float s = std::sin(0.1f * i + 0 + round);
        for (int k = 1; k < n; ++k) s += std::sin(0.1f * i + k + round);
        WC_CHECK(x[i] == s, "all-reduce not in rank order");
      }
      // Messages of different sizes on each rank.
      const auto msgs = AllGatherBytes(c, std::string(static_cast<size_t>(r * 7 + round), 'a' + r));
      for (int k = 0; k < n; ++k)
        WC_CHECK(msgs[k] == std::string(static_cast<size_t>(k * 7 + round), 'a' + k), "bytes");
      std::string b = r == 0 ? std::string(static_cast<size_t>(round), 'z') : "other";
      BroadcastBytes(c, &b, 0);
      WC_CHECK(b == std::string(static_cast<size_t>(round), 'z'), "broadcast bytes");
    }
    c.Barrier();
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

TEST(ThreadGroup, IntegersRideWithTheFloatsInOneAllReduce) {
  const int n = 3;
  const auto errors = OnThreads(n, [](Communicator& c) {
    const int r = c.rank();
    std::vector<float> x = {0.1f * r, 1.0f};
    // Values a float could not carry exactly (past 2^24), and a vote only rank 2 casts.
    int32_t ints[2] = {(1 << 26) + 1 + r, r == 2 ? 1 : 0};
    c.AllReduceSum(x.data(), x.size(), ints, 2);
    WC_CHECK(x[0] == (0.0f + 0.1f) + 0.2f && x[1] == 3.0f, "floats");
    WC_CHECK(ints[0] == 3 * ((1 << 26) + 1) + 3 && ints[1] == 1, "integers");
    WC_CHECK(c.reduce_stats().calls == 1 && c.reduce_stats().bytes == 4.0 * sizeof(float),
             "one collective, float and integer bytes counted");
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

TEST(ThreadGroup, ARankThatNeverComesTimesOutWithAnErrorNamingTheWaitingRank) {
  const auto errors = OnThreads(
      2,
      [](Communicator& c) {
        if (c.rank() == 0) c.Barrier();
      },
      0.2);
  EXPECT_EQ(errors[0],
            "rank 0 of 2: barrier timed out after 0 s waiting for the other ranks (one "
            "of them died or stopped answering)");
  EXPECT_EQ(errors[1], "");
}

TEST(Wire, AShortMessageIsAnErrorNamingIt) {
  WireWriter w;
  w.U32(5);
  w.Str("hello");
  WireReader in(w.bytes(), "rank 1's report");
  EXPECT_EQ(in.U32(), 5u);
  EXPECT_EQ(in.Str(), "hello");
  EXPECT_TRUE(in.done());
  EXPECT_THROW(in.I64(), Error);
  const std::string cut = w.bytes().substr(0, 6);
  WireReader bad(cut, "rank 1's report");
  bad.U32();
  try {
    bad.Str();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1's report"), std::string::npos);
  }
}

}  // namespace
}  // namespace wc
