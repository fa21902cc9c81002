#include "tests/test_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "util/rng.h"

extern char** environ;

namespace wc::test {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

RunResult RunWormchat(const std::vector<std::string>& args, const std::string& input) {
  std::vector<std::string> argv = {WORMCHAT_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, input);
}

RunResult RunProgram(const std::vector<std::string>& argv, const std::string& input) {
  TempDir io;
  WriteFile(io.File("in"), input);
  const pid_t pid = SpawnProgram(argv, io.File("out"), io.File("err"), io.File("in"));
  RunResult r;
  r.exit_code = WaitWormchat(pid);
  r.out = ReadFile(io.File("out"));
  r.err = ReadFile(io.File("err"));
  return r;
}

pid_t SpawnWormchat(const std::vector<std::string>& args, const std::string& out_path,
                    const std::string& err_path, const std::string& in_path) {
  std::vector<std::string> argv_s = {WORMCHAT_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  return SpawnProgram(argv_s, out_path, err_path, in_path);
}

pid_t SpawnProgram(std::vector<std::string> argv_s, const std::string& out_path,
                   const std::string& err_path, const std::string& in_path) {
  // The chats a test's chat keeps go to a directory of this test process, never the user's
  // (~/.local/share/wormchat/chats); a test that means a directory passes --chats-dir.
  // Removed when the test binary exits.
  static const TempDir data_home;
  static const bool exported = setenv("XDG_DATA_HOME", data_home.path().c_str(), 1) == 0;
  (void)exported;
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error(std::string("cannot run ") + argv[0]);
  return pid;
}

int WaitWormchat(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) throw std::runtime_error("waitpid failed");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp ? tmp : "/tmp") + "/wormchat-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string FixtureDir(const std::string& name) {
  return std::string(WORMCHAT_TEST_DATA) + "/fixtures/" + name;
}

void CopyDir(const std::string& from, const std::string& to) {
  std::filesystem::create_directories(to);
  for (const auto& e : std::filesystem::directory_iterator(from))
    std::filesystem::copy(e.path(), to + "/" + e.path().filename().string(),
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::overwrite_existing);
}

int CountLines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  if (!text.empty() && text.back() != '\n') ++n;
  return n;
}

std::vector<int> ReadFixtureIds(const std::string& dir) {
  std::istringstream in(ReadFile(dir + "/ids.txt"));
  std::vector<int> ids;
  int id;
  while (in >> id) ids.push_back(id);
  return ids;
}

std::string Describe(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> RandomVec(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.Uniform() * 2.0 - 1.0);
  return v;
}

std::vector<float> RandomX(int64_t n, int64_t stride, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n * stride));
  for (auto& v : x) v = static_cast<float>(rng.Uniform() * 4.0 - 2.0);
  return x;
}

double RelMaxError(const std::vector<float>& got, const std::vector<float>& ref) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - ref[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
  }
  return err / scale;
}

}  // namespace wc::test
