// dist/communicator.h without mpirun: World() is a single process, and every collective is a copy.
#include <gtest/gtest.h>

#include <vector>

#include "dist/communicator.h"

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

}  // namespace
}  // namespace wc
