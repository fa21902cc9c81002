#include "kvcache/prefix_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <tuple>

#include <xxhash.h>

#include "util/error.h"

namespace wc {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'W', 'C', 'K', 'V', 'B', 'L', 'K', '1'};
constexpr char kTempPrefix[] = ".tmp-";
// A temporary file older than this was left by a writer that died: removed at start.
constexpr auto kStaleTemp = std::chrono::minutes(10);

std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

template <typename T>
void Put(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

// Reads a file's fields in order; every read is bounds-checked against the bytes.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  template <typename T>
  bool Get(T* v) {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  const uint8_t* Take(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return nullptr;
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  size_t offset(const uint8_t* base) const { return static_cast<size_t>(p_ - base); }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

bool WriteAll(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

PrefixStore::PrefixStore(PrefixStoreOptions options) : options_(std::move(options)) {
  const std::string& dir = options_.dir;
  if (dir.empty()) throw Error("--prefix-cache-dir is empty");
  if (options_.max_bytes < 1)
    throw Error(
        Cat("--prefix-cache-dir-max-mb must be >= 1, got a cap of ", options_.max_bytes, " bytes"));
  WC_CHECK(options_.block_size >= 1 && options_.block_bytes >= 1, "prefix store block of ",
           options_.block_size, " tokens, ", options_.block_bytes, " bytes");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(Cat("--prefix-cache-dir ", dir, ": cannot create it: ", ec.message()));
  if (!fs::is_directory(dir, ec))
    throw Error(Cat("--prefix-cache-dir ", dir, ": is not a directory"));
  // Writable, checked now rather than at the first full block.
  const std::string probe = Cat(dir, "/", kTempPrefix, "probe-", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || !WriteAll(fd, reinterpret_cast<const uint8_t*>(kMagic), sizeof kMagic)) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::unlink(probe.c_str());
    throw Error(Cat("--prefix-cache-dir ", dir, ": cannot write in it: ", why));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  // Temporary files of writers that died mid-write.
  const auto now = fs::file_time_type::clock::now();
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kTempPrefix, 0) != 0) continue;
    const auto t = entry.last_write_time(ec);
    if (!ec && now - t > kStaleTemp) fs::remove(entry.path(), ec);
  }
  key_hash_ = XXH3_64bits(options_.key.data(), options_.key.size());
  if (!options_.warn)
    options_.warn = [](const std::string& m) {
      std::fprintf(stderr, "wormchat: warning: %s\n", m.c_str());
    };
  Trim();  // a lowered cap applies at once
  writer_ = std::thread([this] { Writer(); });
}

PrefixStore::~PrefixStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

std::string PrefixStore::PathOf(const int* tokens, int index) const {
  const size_t n = static_cast<size_t>(index + 1) * options_.block_size;
  const uint64_t chain = XXH3_64bits_withSeed(tokens, n * sizeof(int), key_hash_);
  return Cat(options_.dir, "/", Hex16(key_hash_), "-", Hex16(chain), ".kvb");
}

void PrefixStore::Warn(const std::string& message) {
  options_.warn(message);
}

bool PrefixStore::Load(const int* tokens, int index, uint8_t* out) {
  const std::string path = PathOf(tokens, index);
  if (warned_.count(path) != 0) return false;  // damaged: computed again, then rewritten
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // not stored (or not readable: the same to us)
  const size_t n_tokens = static_cast<size_t>(index + 1) * options_.block_size;
  const size_t expected = sizeof kMagic + 8 + 4 + options_.key.size() + 4 + 4 + 4 * n_tokens + 8 +
                          static_cast<size_t>(options_.block_bytes) + 8;
  std::string problem;
  std::vector<uint8_t> data;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    problem = Cat("cannot stat it: ", std::strerror(errno));
  } else if (static_cast<size_t>(st.st_size) != expected) {
    problem = Cat("it is ", st.st_size, " bytes, not the ", expected,
                  " a block of this cache takes (a torn or foreign file)");
  } else {
    data.resize(expected);
    size_t got = 0;
    while (got < expected) {
      const ssize_t r = ::pread(fd, data.data() + got, expected - got, static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    if (got != expected) problem = Cat("reading it failed after ", got, " bytes");
  }
  if (problem.empty()) {
    Reader rd(data.data(), data.size());
    const uint8_t* magic = rd.Take(sizeof kMagic);
    uint64_t key_hash = 0;
    uint32_t key_len = 0, block_size = 0, n = 0;
    uint64_t payload = 0, checksum = 0;
    const uint8_t* key = nullptr;
    const uint8_t* toks = nullptr;
    const uint8_t* bytes = nullptr;
    const bool parsed = magic != nullptr && rd.Get(&key_hash) && rd.Get(&key_len) &&
                        (key = rd.Take(key_len)) != nullptr && rd.Get(&block_size) && rd.Get(&n) &&
                        (toks = rd.Take(4 * static_cast<size_t>(n))) != nullptr &&
                        rd.Get(&payload) && (bytes = rd.Take(payload)) != nullptr;
    const size_t body = rd.offset(data.data());
    if (!parsed || std::memcmp(magic, kMagic, sizeof kMagic) != 0) {
      problem = "it is not a wormchat KV block file";
    } else if (!rd.Get(&checksum) || checksum != XXH3_64bits(data.data(), body)) {
      problem = "its checksum does not match its bytes (damaged)";
    } else if (key_hash != key_hash_ || key_len != options_.key.size() ||
               std::memcmp(key, options_.key.data(), key_len) != 0) {
      problem = "it was written for another model, weights, kernels or KV layout";
    } else if (block_size != static_cast<uint32_t>(options_.block_size) || n != n_tokens ||
               std::memcmp(toks, tokens, 4 * n_tokens) != 0) {
      problem = "it holds other tokens than its name says";
    } else if (payload != static_cast<uint64_t>(options_.block_bytes)) {
      problem = "its K/V payload has the wrong size";
    } else {
      std::memcpy(out, bytes, payload);
    }
  }
  if (!problem.empty()) {
    ::close(fd);
    warned_.insert(path);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.ignored;
    }
    Warn(
        Cat("prefix cache file ", path, ": ", problem, "; ignored, its tokens are computed again"));
    return false;
  }
  ::futimens(fd, nullptr);  // used now: the size cap deletes it last
  ::close(fd);
  known_.insert(path);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.loaded;
  return true;
}

void PrefixStore::Save(const int* tokens, int index, std::vector<uint8_t> bytes) {
  WC_CHECK(static_cast<int64_t>(bytes.size()) == options_.block_bytes, "saving a block of ",
           bytes.size(), " bytes");
  Job job;
  job.path = PathOf(tokens, index);
  if (!known_.insert(job.path).second) return;
  warned_.erase(job.path);
  job.tokens.assign(tokens, tokens + static_cast<size_t>(index + 1) * options_.block_size);
  job.bytes = std::move(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_all();
}

void PrefixStore::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return jobs_.empty() && !busy_; });
}

PrefixStoreStats PrefixStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void PrefixStore::Writer() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, everything written
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    Write(job);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void PrefixStore::Write(const Job& job) {
  std::vector<uint8_t> out;
  out.reserve(job.bytes.size() + 4 * job.tokens.size() + options_.key.size() + 64);
  out.insert(out.end(), kMagic, kMagic + sizeof kMagic);
  Put(out, key_hash_);
  Put(out, static_cast<uint32_t>(options_.key.size()));
  out.insert(out.end(), options_.key.begin(), options_.key.end());
  Put(out, static_cast<uint32_t>(options_.block_size));
  Put(out, static_cast<uint32_t>(job.tokens.size()));
  for (int t : job.tokens) Put(out, static_cast<int32_t>(t));
  Put(out, static_cast<uint64_t>(job.bytes.size()));
  out.insert(out.end(), job.bytes.begin(), job.bytes.end());
  Put(out, XXH3_64bits(out.data(), out.size()));

  static std::atomic<uint64_t> serial{0};
  const std::string tmp =
      Cat(options_.dir, "/", kTempPrefix, ::getpid(), "-", serial.fetch_add(1), ".part");
  std::string failed;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    failed = std::strerror(errno);
  } else {
    if (!WriteAll(fd, out.data(), out.size()) || ::fsync(fd) != 0) failed = std::strerror(errno);
    if (::close(fd) != 0 && failed.empty()) failed = std::strerror(errno);
    if (failed.empty() && ::rename(tmp.c_str(), job.path.c_str()) != 0)
      failed = std::strerror(errno);
  }
  if (!failed.empty()) {
    ::unlink(tmp.c_str());
    bool first;
    {
      std::lock_guard<std::mutex> lock(mu_);
      first = stats_.failed++ == 0;
    }
    if (first)
      Warn(Cat("prefix cache: cannot write ", job.path, ": ", failed, " (the run goes on)"));
    return;
  }
  // The rename itself, durable.
  const int dfd = ::open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  bool trim;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.saved;
    if (dir_bytes_ >= 0) dir_bytes_ += static_cast<int64_t>(out.size());
    trim = dir_bytes_ < 0 || dir_bytes_ > options_.max_bytes;
  }
  if (trim) Trim();
}

void PrefixStore::Trim() {
  struct File {
    fs::file_time_type mtime;
    std::string path;
    int64_t bytes;
  };
  std::vector<File> files;
  int64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".kvb") != 0) continue;
    std::error_code e2;
    if (!entry.is_regular_file(e2)) continue;
    const int64_t bytes = static_cast<int64_t>(entry.file_size(e2));
    if (e2) continue;
    const auto t = entry.last_write_time(e2);
    if (e2) continue;
    files.push_back({t, entry.path().string(), bytes});
    total += bytes;
  }
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
    return std::tie(a.mtime, a.path) < std::tie(b.mtime, b.path);
  });
  int64_t evicted = 0;
  for (const File& f : files) {
    if (total <= options_.max_bytes) break;
    if (fs::remove(f.path, ec)) {
      total -= f.bytes;
      ++evicted;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.evicted += evicted;
  dir_bytes_ = total;
}

}  // namespace wc
