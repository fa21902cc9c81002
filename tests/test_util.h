// Helpers the test binaries share: running the real `wormchat` binary, temporary directories,
// fixtures, seeded inputs and bit-exact comparisons.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wc::test {

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the wormchat binary with `args` (no shell), stdin from `input`.
RunResult RunWormchat(const std::vector<std::string>& args, const std::string& input = "");
// The same for any program: argv[0] is its path.
RunResult RunProgram(const std::vector<std::string>& argv, const std::string& input = "");
// Starts the wormchat binary with `args` in the background (stdin from `in_path`, stdout and
// stderr to the given files) and returns its pid, for tests that signal or kill it mid-run.
pid_t SpawnWormchat(const std::vector<std::string>& args, const std::string& out_path,
                    const std::string& err_path, const std::string& in_path = "/dev/null");
// The same for any program: argv[0] is its path.
pid_t SpawnProgram(std::vector<std::string> argv, const std::string& out_path,
                   const std::string& err_path, const std::string& in_path = "/dev/null");
// Waits for a spawned process: its exit code, or 128 + the signal that ended it.
int WaitWormchat(pid_t pid);

// A fresh directory under $TMPDIR, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string FixtureDir(const std::string& name);  // tests/fixtures/NAME
// The token ids of a fixture directory's ids.txt (whitespace-separated).
std::vector<int> ReadFixtureIds(const std::string& dir);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& bytes);
void CopyDir(const std::string& from, const std::string& to);
int CountLines(const std::string& text);
// A run's exit code, stdout and stderr, for a failing expectation's message.
std::string Describe(const RunResult& r);
// The same size and the same bits (-0 is not 0, NaNs compare by payload).
bool SameBits(const std::vector<float>& a, const std::vector<float>& b);
// n floats uniform in [-1, 1) from util/rng.h's Rng(seed).
std::vector<float> RandomVec(size_t n, uint64_t seed);
// Activations x [n, stride] uniform in [-2, 2) from Rng(seed).
std::vector<float> RandomX(int64_t n, int64_t stride, uint64_t seed);
// max |got - ref| / max |ref|: the relative error bound the numeric tests use.
double RelMaxError(const std::vector<float>& got, const std::vector<float>& ref);

}  // namespace wc::test
