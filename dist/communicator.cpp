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

void Communicator::AllReduceSum(float* data, size_t n) {
  if (size() == 1 || n == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> all(n * static_cast<size_t>(size()));  // [size, n]
  AllGather(data, n * sizeof(float), all.data());
  for (size_t i = 0; i < n; ++i) {
    float s = all[i];
    for (int r = 1; r < size(); ++r) s += all[static_cast<size_t>(r) * n + i];
    data[i] = s;
  }
  ++reduce_stats_.calls;
  reduce_stats_.bytes += static_cast<double>(n * sizeof(float));
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
