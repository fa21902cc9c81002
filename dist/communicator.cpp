#include "dist/communicator.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "dist/mpi_communicator.h"
#include "util/error.h"

namespace wc {
namespace {

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string Describe() const override { return "single process"; }
  void Broadcast(void*, size_t, int root) override {
    WC_CHECK(root == 0, "broadcast from rank ", root, " of a single process");
  }
  void AllGather(const void* in, size_t bytes, void* out) override {
    if (bytes > 0 && in != out) std::memmove(out, in, bytes);
  }
  void Barrier() override {}
  [[noreturn]] void Abort(int code) override { std::exit(code); }
};

Communicator* g_world = nullptr;  // set once World() has made it

}  // namespace

void Communicator::AllReduceSum(float* data, size_t n, int32_t* ints, size_t n_ints) {
  if (size() == 1 || n + n_ints == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  static_assert(sizeof(float) == sizeof(uint32_t) && sizeof(int32_t) == sizeof(uint32_t));
  const size_t words = n + n_ints;  // one rank's message: the floats, then the integers
  std::vector<uint32_t> all(words * static_cast<size_t>(size()));  // [size, words]
  if (n_ints == 0) {
    AllGather(data, n * sizeof(float), all.data());
  } else {
    std::vector<uint32_t> mine(words);
    std::memcpy(mine.data(), data, n * sizeof(float));
    std::memcpy(mine.data() + n, ints, n_ints * sizeof(int32_t));
    AllGather(mine.data(), words * sizeof(uint32_t), all.data());
  }
  auto word = [&](int r, size_t i) { return &all[static_cast<size_t>(r) * words + i]; };
  for (size_t i = 0; i < n; ++i) {
    float s, x;
    std::memcpy(&s, word(0, i), sizeof s);
    for (int r = 1; r < size(); ++r) {
      std::memcpy(&x, word(r, i), sizeof x);
      s += x;
    }
    data[i] = s;
  }
  for (size_t j = 0; j < n_ints; ++j) {
    int64_t s = 0;
    for (int r = 0; r < size(); ++r) {
      int32_t x;
      std::memcpy(&x, word(r, n + j), sizeof x);
      s += x;
    }
    ints[j] = static_cast<int32_t>(s);
  }
  ++reduce_stats_.calls;
  reduce_stats_.bytes += static_cast<double>(words * sizeof(uint32_t));
  reduce_stats_.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::unique_ptr<Communicator> MakeSingleProcessCommunicator() {
  return std::make_unique<SingleProcessCommunicator>();
}

Communicator& World() {
  static std::unique_ptr<Communicator> world = [] {
    std::unique_ptr<Communicator> c = MakeMpiWorldIfLaunched();
    if (!c) c = MakeSingleProcessCommunicator();
    if (const char* t = std::getenv("WORMCHAT_COLLECTIVE_TIMEOUT")) {
      char* end = nullptr;
      const double s = std::strtod(t, &end);
      if (end == t || *end != '\0' || !(s > 0))
        throw Error(Cat("WORMCHAT_COLLECTIVE_TIMEOUT='", t, "' must be a number of seconds > 0"));
      c->set_timeout_seconds(s);
    }
    return c;
  }();
  g_world = world.get();
  return *world;
}

Communicator* WorldIfStarted() {
  return g_world;
}

}  // namespace wc
