#include "dist/mpi_communicator.h"

#ifdef WORMCHAT_HAVE_MPI

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

#include "util/error.h"

namespace wc {
namespace {

// Collectives are started non-blocking and polled against the timeout, so a rank that died or
// stopped answering ends the job with an error instead of a hang.
class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // The ranks sharing this host's memory (their count sets the default threads per rank).
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  std::string Describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, static_cast<size_t>(len));
    const size_t comma = v.find(',');
    if (comma != std::string::npos) v.resize(comma);
    return Cat("MPI (", v, "), ", size_, " ranks");
  }
  void Broadcast(void* data, size_t bytes, int root) override {
    // MPI counts are ints: a message past 1 GiB goes in pieces.
    constexpr size_t kPiece = size_t{1} << 30;
    char* p = static_cast<char*>(data);
    size_t off = 0;
    do {
      const size_t n = std::min(kPiece, bytes - off);
      MPI_Request req;
      Check(MPI_Ibcast(p + off, static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD, &req),
            "broadcast");
      Wait(&req, "broadcast");
      off += n;
    } while (off < bytes);
  }
  void AllGather(const void* in, size_t bytes, void* out) override {
    if (bytes > static_cast<size_t>(INT_MAX))
      throw Error(Cat("rank ", rank_, ": an all-gather of ", bytes,
                      " bytes per rank is past MPI's ", INT_MAX, "-byte limit"));
    MPI_Request req;
    Check(MPI_Iallgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes),
                         MPI_BYTE, MPI_COMM_WORLD, &req),
          "all-gather");
    Wait(&req, "all-gather");
  }
  void Barrier() override {
    MPI_Request req;
    Check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "barrier");
    Wait(&req, "barrier");
  }
  [[noreturn]] void Abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  void Check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) {
      MarkBroken();
      char msg[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(rc, msg, &len);
      throw Error(Cat("rank ", rank_, ": MPI ", what, " failed: ", std::string(msg, len)));
    }
  }
  void Wait(MPI_Request* req, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      int done = 0;
      Check(MPI_Test(req, &done, MPI_STATUS_IGNORE), what);
      if (done) return;
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_seconds()) {
        MarkBroken();
        throw Error(Cat("rank ", rank_, " of ", size_, ": ", what, " timed out after ",
                        static_cast<int>(timeout_seconds()),
                        " s waiting for the other ranks (one of them died or stopped "
                        "answering); ending the job"));
      }
      // Spin for the first 200 us (a tensor-parallel layer's sums are microseconds apart and a
      // sleep costs ~60 us to wake from), then sleep, longer the longer the wait, so a rank
      // waiting on a busy one (its serving loop, a slow request) leaves it the cores.
      if (waited > 200e-6)
        std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 20 + spins / 64)));
    }
  }
  int rank_ = 0, size_ = 1, local_size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> MakeMpiWorldIfLaunched() {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMI_SIZE") == nullptr)
    return nullptr;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Serialized: one thread at a time, not always the main one (a tensor-parallel rank 0 meets
    // the others from its serving loop's thread).
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED)
      throw Error(Cat("this MPI library gives thread level ", provided,
                      "; wormchat needs MPI_THREAD_SERIALIZED"));
  }
  return std::make_unique<MpiCommunicator>();
}

}  // namespace wc

#else  // built without MPI

namespace wc {

std::unique_ptr<Communicator> MakeMpiWorldIfLaunched() {
  return nullptr;
}

}  // namespace wc

#endif
