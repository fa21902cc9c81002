// The persisted prefix cache (kvcache/prefix_store.h): blocks written by one store are read back
// by another over the same directory and key; a torn, corrupted, foreign or misnamed file is
// ignored with one warning; the size cap deletes the oldest files; writes are atomic (no partial
// file is ever visible under a block's name); an unusable directory is a one-line error at start.
#include "kvcache/prefix_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

namespace fs = std::filesystem;

constexpr int kBlockSize = 4;
constexpr int64_t kBlockBytes = 1000;

// A fresh directory for one test, inside one the test binary removes when it exits.
std::string StoreDir(const std::string& name) {
  static const test::TempDir root;
  const fs::path dir = fs::path(root.path()) / name;
  fs::remove_all(dir);
  return dir.string();
}

struct Warnings {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(m);
    };
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return lines.size();
  }
  std::string last() {
    std::lock_guard<std::mutex> lock(mu);
    return lines.empty() ? "" : lines.back();
  }
};

PrefixStoreOptions Options(const std::string& dir, Warnings& w, const std::string& key = "model A",
                           int64_t max_bytes = int64_t{1} << 30) {
  PrefixStoreOptions o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.key = key;
  o.block_size = kBlockSize;
  o.block_bytes = kBlockBytes;
  o.warn = w.sink();
  return o;
}

// Tokens [0, n) of a sequence that starts with `first`.
std::vector<int> StrideSeq(int n, int first = 100) {
  std::vector<int> t(n);
  for (int i = 0; i < n; ++i) t[i] = first + 7 * i;
  return t;
}

std::vector<uint8_t> Bytes(int seed) {
  std::vector<uint8_t> b(kBlockBytes);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(seed * 31 + i * 13);
  return b;
}

int CountFiles(const std::string& dir, const std::string& suffix) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      ++n;
  }
  return n;
}

TEST(PrefixStore, BlocksWrittenByOneRunAreReadByTheNext) {
  Warnings w;
  const std::string dir = StoreDir("roundtrip") + "/a/b";  // parents created
  const std::vector<int> tokens = StrideSeq(3 * kBlockSize);
  {
    PrefixStore store(Options(dir, w));
    for (int i = 0; i < 3; ++i) {
      EXPECT_FALSE(store.Known(tokens.data(), i));
      store.Save(tokens.data(), i, Bytes(i));
      EXPECT_TRUE(store.Known(tokens.data(), i));
    }
    store.Save(tokens.data(), 1, Bytes(1));  // known: not queued again
  }                                          // destruction writes what is queued
  EXPECT_EQ(CountFiles(dir, ".kvb"), 3);
  EXPECT_EQ(CountFiles(dir, ".part"), 0);
  PrefixStore again(Options(dir, w));
  std::vector<uint8_t> out(kBlockBytes);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(again.Load(tokens.data(), i, out.data())) << i;
    EXPECT_EQ(out, Bytes(i)) << i;
  }
  // Another sequence (same first block, another second) finds only the first block.
  std::vector<int> other = tokens;
  other[kBlockSize + 1] += 1;
  EXPECT_TRUE(again.Load(other.data(), 0, out.data()));
  EXPECT_FALSE(again.Load(other.data(), 1, out.data()));
  EXPECT_EQ(again.stats().loaded, 4);
  EXPECT_EQ(w.size(), 0u);
  // Another key (another model, KV format, ...) finds nothing.
  PrefixStore foreign(Options(dir, w, "model B"));
  EXPECT_FALSE(foreign.Load(tokens.data(), 0, out.data()));
  EXPECT_EQ(w.size(), 0u);
}

// Damage one stored block in place, then read it with a fresh store: ignored, warned once, and
// rewritten by the next Save (the block computed again).
void ExpectIgnored(const std::string& name, const std::function<void(const std::string&)>& damage,
                   const std::string& why) {
  SCOPED_TRACE(name);
  Warnings w;
  const std::string dir = StoreDir(name);
  const std::vector<int> tokens = StrideSeq(2 * kBlockSize);
  std::string path;
  {
    PrefixStore store(Options(dir, w));
    store.Save(tokens.data(), 1, Bytes(5));
    path = store.PathOf(tokens.data(), 1);
  }
  damage(path);
  PrefixStore store(Options(dir, w));
  std::vector<uint8_t> out(kBlockBytes, 0);
  EXPECT_FALSE(store.Load(tokens.data(), 1, out.data()));
  EXPECT_FALSE(store.Load(tokens.data(), 1, out.data()));  // warned once
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w.last().find(path), std::string::npos) << w.last();
  EXPECT_NE(w.last().find(why), std::string::npos) << w.last();
  EXPECT_NE(w.last().find("computed again"), std::string::npos) << w.last();
  EXPECT_EQ(w.last().find('\n'), std::string::npos);
  EXPECT_EQ(store.stats().ignored, 1);
  EXPECT_EQ(out, std::vector<uint8_t>(kBlockBytes, 0));  // nothing of it was used
  // Computed again and saved: the file is whole again.
  store.Save(tokens.data(), 1, Bytes(5));
  store.Flush();
  PrefixStore fresh(Options(dir, w));
  EXPECT_TRUE(fresh.Load(tokens.data(), 1, out.data()));
  EXPECT_EQ(out, Bytes(5));
}

TEST(PrefixStore, DamagedFilesAreIgnoredWarnedAndRewritten) {
  ExpectIgnored(
      "torn", [](const std::string& p) { fs::resize_file(p, fs::file_size(p) / 2); }, "torn");
  ExpectIgnored(
      "empty", [](const std::string& p) { fs::resize_file(p, 0); }, "torn");
  ExpectIgnored(
      "flipped",
      [](const std::string& p) {
        std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(fs::file_size(p) - 100));
        char c = 0;
        f.read(&c, 1);
        f.seekp(static_cast<std::streamoff>(fs::file_size(p) - 100));
        c ^= 0x10;
        f.write(&c, 1);
      },
      "checksum");
  ExpectIgnored(
      "garbage",
      [](const std::string& p) {
        const auto size = fs::file_size(p);
        std::ofstream f(p, std::ios::binary | std::ios::trunc);
        f << std::string(size, 'x');
      },
      "not a wormchat KV block file");
}

TEST(PrefixStore, AFileOfAnotherKeyOrOtherTokensUnderThisNameIsIgnored) {
  Warnings w;
  const std::string dir = StoreDir("misnamed");
  const std::vector<int> a = StrideSeq(kBlockSize, 100), b = StrideSeq(kBlockSize, 500);
  std::string path_a, path_b, foreign;
  {
    PrefixStore store(Options(dir, w));
    store.Save(a.data(), 0, Bytes(1));
    path_a = store.PathOf(a.data(), 0);
    path_b = store.PathOf(b.data(), 0);
    PrefixStore other(Options(dir, w, "model B"));
    other.Save(b.data(), 0, Bytes(2));
    foreign = other.PathOf(b.data(), 0);
  }
  std::vector<uint8_t> out(kBlockBytes);
  {
    fs::copy_file(path_a, path_b);  // a's block under b's name
    PrefixStore store(Options(dir, w));
    EXPECT_FALSE(store.Load(b.data(), 0, out.data()));
    EXPECT_NE(w.last().find("other tokens"), std::string::npos) << w.last();
    fs::remove(path_b);
  }
  {
    fs::copy_file(foreign, path_b);  // model B's block of b under model A's name for b
    PrefixStore store(Options(dir, w));
    EXPECT_FALSE(store.Load(b.data(), 0, out.data()));
    EXPECT_NE(w.last().find("another model"), std::string::npos) << w.last();
  }
}

TEST(PrefixStore, TheSizeCapDeletesTheOldestFiles) {
  Warnings w;
  const std::string dir = StoreDir("cap");
  std::vector<int> tokens = StrideSeq(8 * kBlockSize);
  // A block's file holds the tokens up to its end: block 7's is the largest, and any three of
  // blocks 0-7 fit in three of its size, any four do not.
  int64_t file_bytes = 0;
  {
    PrefixStore probe(Options(dir, w));
    probe.Save(tokens.data(), 0, Bytes(0));
    probe.Flush();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    file_bytes = static_cast<int64_t>(fs::file_size(probe.PathOf(tokens.data(), 0))) +
                 7 * kBlockSize * static_cast<int64_t>(sizeof(int));
  }
  PrefixStore store(Options(dir, w, "model A", 3 * file_bytes));
  std::vector<std::string> paths;
  for (int i = 1; i < 8; ++i) {
    store.Save(tokens.data(), i, Bytes(i));
    store.Flush();  // one at a time: distinct write times (the clock files get is coarse), in order
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    paths.push_back(store.PathOf(tokens.data(), i));
  }
  EXPECT_EQ(CountFiles(dir, ".kvb"), 3);
  for (size_t i = 0; i < paths.size(); ++i)
    EXPECT_EQ(fs::exists(paths[i]), i + 3 >= paths.size()) << i;
  EXPECT_EQ(store.stats().evicted, 5);
  EXPECT_EQ(store.stats().saved, 7);
  // A lowered cap applies when a store starts.
  PrefixStore smaller(Options(dir, w, "model A", file_bytes));
  EXPECT_EQ(CountFiles(dir, ".kvb"), 1);
  EXPECT_TRUE(fs::exists(paths.back()));
}

TEST(PrefixStore, AnUnusableDirectoryIsAOneLineErrorAtStart) {
  Warnings w;
  const std::string base = StoreDir("unusable");
  fs::create_directories(base);
  const std::string file = base + "/plain-file";
  std::ofstream(file) << "x";
  for (const std::string& dir : {file, file + "/sub"}) {
    try {
      PrefixStore store(Options(dir, w));
      FAIL() << dir;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--prefix-cache-dir " + dir + ": "), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  if (::geteuid() != 0) {  // root writes anywhere
    const std::string ro = base + "/read-only";
    fs::create_directories(ro);
    ::chmod(ro.c_str(), 0500);
    EXPECT_THROW(PrefixStore(Options(ro, w)), Error);
    ::chmod(ro.c_str(), 0700);
  }
  PrefixStoreOptions zero = Options(base + "/ok", w);
  zero.max_bytes = 0;
  EXPECT_THROW(PrefixStore{zero}, Error);
}

TEST(PrefixStore, AStaleTemporaryFileIsRemovedAtStart) {
  Warnings w;
  const std::string dir = StoreDir("stale");
  fs::create_directories(dir);
  const std::string stale = dir + "/.tmp-1-0.part", fresh = dir + "/.tmp-2-0.part";
  std::ofstream(stale) << "half a block";
  std::ofstream(fresh) << "a write in progress";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(1));
  PrefixStore store(Options(dir, w));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));  // another process may be writing it
}

// The writer thread against the loop's thread: saves, loads and stats at once (run under TSan by
// tools/tsan.sh).
TEST(PrefixStore, SavesLoadsAndStatsFromTwoThreads) {
  Warnings w;
  const std::string dir = StoreDir("threads");
  const std::vector<int> tokens = StrideSeq(64 * kBlockSize);
  std::atomic<bool> done{false};
  PrefixStore store(Options(dir, w, "model A", 20 * (kBlockBytes + 100)));
  std::thread watcher([&] {
    while (!done.load()) {
      const PrefixStoreStats s = store.stats();
      EXPECT_GE(s.saved, 0);
    }
  });
  std::vector<uint8_t> out(kBlockBytes);
  for (int i = 0; i < 64; ++i) {
    store.Save(tokens.data(), i, Bytes(i));
    if (i % 8 == 7) {
      store.Flush();
      EXPECT_TRUE(store.Load(tokens.data(), i, out.data()) || store.stats().evicted > 0);
    }
  }
  store.Flush();
  done = true;
  watcher.join();
  EXPECT_EQ(store.stats().saved, 64);
  EXPECT_LE(CountFiles(dir, ".kvb"), 20);
  EXPECT_GT(store.stats().evicted, 0);
  EXPECT_EQ(w.size(), 0u);
}

}  // namespace
}  // namespace wc
