// Run by ctest under `mpirun -np 2` (tests/CMakeLists.txt): the MPI communicator's collectives
// against values every rank can compute, and, with the argument "timeout", a collective that one
// rank never joins: it must end the job with a one-line error naming the rank, not hang.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "dist/communicator.h"
#include "util/error.h"

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "dist_mpi_check: %s\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  wc::Communicator& w = wc::World();
  const int r = w.rank(), n = w.size();
  if (n < 2) return Fail("needs at least 2 ranks (run under mpirun -np 2)");
  if (argc > 1 && std::strcmp(argv[1], "timeout") == 0) {
    w.set_timeout_seconds(2);
    try {
      if (r == 1) {
        sleep(30);  // never joins in time
        return 0;
      }
      w.Barrier();
      return Fail("the barrier returned without rank 1");
    } catch (const wc::Error& e) {
      std::fprintf(stderr, "wormchat: error: %s\n", e.what());
      w.Abort(1);
    }
  }
  // All-gather: rank r contributes {r, 10 r}.
  const int mine[2] = {r, 10 * r};
  std::vector<int> all(2 * static_cast<size_t>(n));
  w.AllGather(mine, sizeof mine, all.data());
  for (int i = 0; i < n; ++i)
    if (all[2 * i] != i || all[2 * i + 1] != 10 * i) return Fail("all-gather out of order");
  // Broadcast from the last rank.
  double v = r == n - 1 ? 3.25 : -1;
  w.Broadcast(&v, sizeof v, n - 1);
  if (v != 3.25) return Fail("broadcast");
  // All-reduce in rank order: the same bits on every rank, equal to the sequential sum.
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * i + r) * (1 + r);
  std::vector<float> expect(x.size(), 0.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    float s = 0;
    for (int k = 0; k < n; ++k) {
      const float xk = std::sin(0.37f * i + k) * (1 + k);
      s = k == 0 ? xk : s + xk;
    }
    expect[i] = s;
  }
  w.AllReduceSum(x.data(), x.size());
  if (std::memcmp(x.data(), expect.data(), x.size() * sizeof(float)) != 0)
    return Fail("all-reduce differs from the rank-order sum");
  w.Barrier();
  if (r == 0) std::printf("dist_mpi_check: %s: collectives ok\n", w.Describe().c_str());
  return 0;
}
