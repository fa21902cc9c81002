// Hostile input through the real binary (issue 15): every bad flag value, file or size ends with
// exit 1 (bad input, file or value) or 2 (command-line usage) and exactly one line on stderr that
// names what is wrong, quickly, before any large allocation - never a crash, a hang or an
// out-of-memory kill. Each run has a deadline; a run past it is killed and fails the test.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace wc {
namespace {

using Clock = std::chrono::steady_clock;

struct RunOutcome {
  int exit_code = -1;  // 128 + signal when killed
  bool timed_out = false;
  double seconds = 0;
  std::string out, err;
};

// Runs wormchat with `args` (stdin from `input`), killing it after `timeout_s`.
RunOutcome RunWithDeadline(const std::vector<std::string>& args, const std::string& input = "",
                           double timeout_s = 30) {
  test::TempDir dir;
  test::WriteFile(dir.File("in"), input);
  const auto t0 = Clock::now();
  const pid_t pid = test::SpawnWormchat(args, dir.File("out"), dir.File("err"), dir.File("in"));
  RunOutcome r;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = test::ReadFile(dir.File("out"));
  r.err = test::ReadFile(dir.File("err"));
  return r;
}

std::string Join(const std::vector<std::string>& args) {
  std::string s = "wormchat";
  for (const std::string& a : args) s += " " + a;
  return s;
}

// Exit `code`, one stderr line "wormchat: error: ..." containing every needle, within `max_s`.
void ExpectRefused(const std::vector<std::string>& args, int code,
                   const std::vector<std::string>& needles, double max_s = 10,
                   const std::string& input = "") {
  const RunOutcome r = RunWithDeadline(args, input, max_s);
  const std::string what = Join(args) + "\n" + r.err;
  EXPECT_FALSE(r.timed_out) << "still running after " << max_s << " s: " << what;
  EXPECT_EQ(r.exit_code, code) << what;
  EXPECT_EQ(test::CountLines(r.err), 1) << what;
  EXPECT_EQ(r.err.rfind("wormchat: error: ", 0), 0u) << what;
  for (const std::string& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << what;
}

// ---- Issue 15's defects ----

TEST(Hostile, ThreadsAboveTheBoundAreRefusedNotCrashed) {  // defect 1
  for (const char* cmd : {"generate", "logits", "perplexity", "info", "tokenize", "init"})
    ExpectRefused({cmd, "--threads", "100000"}, 2, {"--threads", "1024"});
}

TEST(Hostile, AContextOverflowingIntIsASizeErrorNotAnInternalOne) {  // defect 2
  ExpectRefused({"generate", "--prompt", "hi", "--ctx", "2147483647", "--kv-block-size", "16"}, 1,
                {"KV cache", "bytes", "available", "--ctx"});
}

TEST(Hostile, AHugeKVCacheIsRefusedBeforeAnyAllocation) {  // defect 3
  // 10^9 one-token blocks: refused in well under a second, with the bytes needed and available.
  const RunOutcome r = RunWithDeadline(
      {"generate", "--prompt", "hi", "--ctx", "1000000000", "--kv-block-size", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_LT(r.seconds, 5) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.err,
      std::regex(R"(needs [0-9.]+ TiB \([0-9]+ bytes\) but [0-9.]+ [KMGT]iB are available)")))
      << r.err;
  ExpectRefused({"batch", "-i", "/dev/null", "-o", "/dev/null", "--ctx", "1000000000"}, 1,
                {"KV cache", "available"});
}

TEST(Hostile, InitOfAnAbsurdSizeIsRefusedAtOnce) {  // defects 6 and 9
  test::TempDir out;
  ExpectRefused({"init", "--layers", "100000000", "--out", out.path()}, 2, {"--layers", "1024"});
  ExpectRefused({"init", "--hidden", "536870912", "--out", out.path()}, 2, {"--hidden"});
  ExpectRefused({"init", "--preset", "falcon-40b", "--layers", "-3", "--out", out.path()}, 2,
                {"--layers"});
  // The largest allowed shape is checked against the disk before a byte is written.
  ExpectRefused({"init", "--preset", "falcon-40b", "--layers", "1024", "--out", out.path()}, 1,
                {"free", "--layers"});
}

TEST(Hostile, ConfigWithOutOfRangeNumbersNamesTheFileAndKey) {  // defects 4 and 6
  test::TempDir m;
  test::CopyDir(test::FixtureDir("mq_f32"), m.path());
  test::CopyDir(test::FixtureDir("tokenizer"), m.path());
  std::string config = test::ReadFile(m.File("config.json"));
  const std::string key = "\"hidden_size\":";
  const size_t at = config.find(key);
  ASSERT_NE(at, std::string::npos) << config;
  const size_t end = config.find_first_of(",}", at);
  for (const char* value : {"1e400", "4294967296", "-64", "64.5"}) {
    std::string bad = config;
    bad.replace(at, end - at, key + std::string(" ") + value);
    test::WriteFile(m.File("config.json"), bad);
    ExpectRefused({"generate", "--model", m.path(), "--prompt", "hi"}, 1, {m.File("config.json")});
  }
}

// ---- The command line ----

TEST(Hostile, MistypedCommandsAndFlagsSuggestTheNearest) {
  ExpectRefused({"generte", "--prompt", "x"}, 2, {"unknown command 'generte'", "'generate'"});
  ExpectRefused({"generate", "--temprature", "0.5", "--prompt", "x"}, 2,
                {"unknown flag --temprature; did you mean --temperature?"});
  ExpectRefused({"chat", "--sed", "3"}, 2, {"--sed", "--seed"});
  ExpectRefused({"generate", "--prompt", "x", "stray"}, 2, {"'stray'"});
  ExpectRefused({}, 2, {"command is required"});
}

TEST(Hostile, EmptyPromptAndStopAreRefused) {
  ExpectRefused({"generate", "--prompt", ""}, 1, {"--prompt is empty"});
  ExpectRefused({"generate", "--prompt", "  \n"}, 1, {"--prompt is empty"});
  ExpectRefused({"generate", "--prompt", "hi", "--stop", ""}, 1, {"--stop is empty"});
}

TEST(Hostile, SeedMinusOneIsRandomAndSaysWhichOtherJunkIsRefused) {
  const RunOutcome r = RunWithDeadline({"generate", "--prompt", "hi", "-n", "3", "--seed", "-1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("using seed ([0-9]+)"))) << r.err;
  // The printed seed repeats the run.
  const RunOutcome again =
      RunWithDeadline({"generate", "--prompt", "hi", "-n", "3", "--seed", m[1]});
  EXPECT_EQ(again.out, r.out);
  for (const char* bad : {"-2", "abc", "18446744073709551616", "1.5", ""})
    ExpectRefused({"generate", "--prompt", "hi", "--seed", bad}, 2, {"--seed"});
}

TEST(Hostile, OutputThatCannotBeWrittenFailsLoudly) {
  struct stat st {};
  if (stat("/dev/full", &st) != 0) GTEST_SKIP() << "no /dev/full here";
  test::TempDir dir;
  const std::string out = dir.File("out");
  std::vector<std::string> args = {"generate", "--prompt", "hi", "-n", "4"};
  // stdout is /dev/full: the shell-free spawn writes stdout to a path, so use /dev/full itself.
  const pid_t pid = test::SpawnWormchat(args, "/dev/full", dir.File("err"));
  EXPECT_EQ(test::WaitWormchat(pid), 1);
  const std::string err = test::ReadFile(dir.File("err"));
  EXPECT_EQ(test::CountLines(err), 1) << err;
  EXPECT_NE(err.find("writing standard output failed"), std::string::npos) << err;
}

TEST(Hostile, InitDoesNotOverwriteAModelWithoutForce) {
  test::TempDir out;
  const std::string tok = test::FixtureDir("tokenizer") + "/tokenizer.model";
  const std::vector<std::string> init = {"init",        "--preset", "tiny",  "--layers", "1",
                                         "--tokenizer", tok,        "--out", out.path()};
  ASSERT_EQ(RunWithDeadline(init).exit_code, 0);
  const std::string before = test::ReadFile(out.File("model.safetensors"));
  std::vector<std::string> again = init;
  again.insert(again.end(), {"--seed", "5"});
  ExpectRefused(again, 1, {out.path(), "already holds a model", "--force"});
  EXPECT_EQ(test::ReadFile(out.File("model.safetensors")), before) << "overwritten";
  again.push_back("--force");
  EXPECT_EQ(RunWithDeadline(again).exit_code, 0);
  EXPECT_NE(test::ReadFile(out.File("model.safetensors")), before);
}

TEST(Hostile, InitOnAFullDiskFailsCleanlyAndLeavesNoHalfModel) {
  // A disk that fills up mid-write, simulated with RLIMIT_FSIZE (writes past 2 MB fail with
  // EFBIG; SIGXFSZ ignored): init stops at the tensor where the write fails, with one line, and
  // leaves neither a truncated model.safetensors nor a config.json that would pass for a model.
  test::TempDir dir;
  const std::string out = dir.File("model");
  const std::string tok = test::FixtureDir("tokenizer") + "/tokenizer.model";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const rlimit limit{2 << 20, 2 << 20};
    setrlimit(RLIMIT_FSIZE, &limit);
    signal(SIGXFSZ, SIG_IGN);
    const int err = open(dir.File("err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, 2);
    execl(WORMCHAT_BINARY, WORMCHAT_BINARY, "init", "--preset", "tiny", "--tokenizer", tok.c_str(),
          "--out", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const int status = test::WaitWormchat(pid);
  const std::string err = test::ReadFile(dir.File("err"));
  EXPECT_EQ(status, 1) << err;
  EXPECT_EQ(test::CountLines(err), 1) << err;
  EXPECT_NE(err.find("model.safetensors: write failed (File too large)"), std::string::npos) << err;
  struct stat st {};
  EXPECT_NE(stat((out + "/model.safetensors").c_str(), &st), 0) << "a truncated checkpoint";
  EXPECT_NE(stat((out + "/model.safetensors.tmp").c_str(), &st), 0) << "the temporary stayed";
  EXPECT_NE(stat((out + "/config.json").c_str(), &st), 0) << "a config without weights";
}

TEST(Hostile, DirectoriesAndSymlinkLoopsWhereFilesBelongAreNamed) {
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.model"}) {
    test::TempDir m;
    test::CopyDir(test::FixtureDir("mha_seq_bf16"), m.path());
    test::CopyDir(test::FixtureDir("tokenizer"), m.path());
    const std::string path = m.File(name);
    std::remove(path.c_str());
    mkdir(path.c_str(), 0755);
    ExpectRefused({"generate", "--model", m.path(), "--prompt", "hi"}, 1,
                  {path, "is a directory, expected a file"});
    rmdir(path.c_str());
    ASSERT_EQ(symlink(name, path.c_str()), 0);  // a link to itself
    ExpectRefused({"generate", "--model", m.path(), "--prompt", "hi"}, 1,
                  {path, "Too many levels of symbolic links"});
    std::remove(path.c_str());
    ASSERT_EQ(mkfifo(path.c_str(), 0644), 0);  // would block a reader forever
    ExpectRefused({"generate", "--model", m.path(), "--prompt", "hi"}, 1,
                  {path, "is not a regular file"});
  }
  ExpectRefused({"perplexity", "--text", "/"}, 1, {"/: is a directory"});
  ExpectRefused({"batch", "-i", "/", "-o", "/dev/null"}, 1, {"is a directory"});
}

// Runs wormchat with `args` as an unprivileged user: as root (CI containers), as nobody (65534),
// since root reads files whatever their mode. Exit 126 if the user cannot be switched.
RunOutcome RunUnprivileged(const std::vector<std::string>& args) {
  test::TempDir io;
  const std::string out = io.File("out"), err = io.File("err");
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
    dup2(open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
      _exit(126);
    std::vector<char*> argv = {const_cast<char*>(WORMCHAT_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(WORMCHAT_BINARY, argv.data());
    _exit(127);
  }
  RunOutcome r;
  r.exit_code = test::WaitWormchat(pid);
  r.out = test::ReadFile(out);
  r.err = test::ReadFile(err);
  return r;
}

TEST(Hostile, UnreadableFilesAreNamed) {
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.model"}) {
    test::TempDir m;
    ASSERT_EQ(chmod(m.path().c_str(), 0755), 0);  // nobody may look inside
    test::CopyDir(test::FixtureDir("mha_seq_bf16"), m.path());
    test::CopyDir(test::FixtureDir("tokenizer"), m.path());
    const std::string path = m.File(name);
    ASSERT_EQ(chmod(path.c_str(), 0), 0);
    const RunOutcome r = RunUnprivileged({"generate", "--model", m.path(), "--prompt", "hi"});
    if (r.exit_code == 126) GTEST_SKIP() << "cannot switch to an unprivileged user";
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(test::CountLines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(path + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  }
  test::TempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);
  test::WriteFile(dir.File("in.txt"), "hello\n");
  ASSERT_EQ(chmod(dir.File("in.txt").c_str(), 0), 0);
  const RunOutcome batch =
      RunUnprivileged({"batch", "-i", dir.File("in.txt"), "-o", dir.File("out.jsonl")});
  EXPECT_EQ(batch.exit_code, 1) << batch.err;
  EXPECT_EQ(test::CountLines(batch.err), 1) << batch.err;
  EXPECT_NE(batch.err.find(dir.File("in.txt")), std::string::npos) << batch.err;
  EXPECT_NE(batch.err.find("Permission denied"), std::string::npos) << batch.err;
  test::WriteFile(dir.File("t.txt"), "wormchat: 0.1.0\n");
  ASSERT_EQ(chmod(dir.File("t.txt").c_str(), 0), 0);
  const RunOutcome replay = RunUnprivileged({"transcript", "replay", dir.File("t.txt")});
  EXPECT_NE(replay.exit_code, 0);
  EXPECT_NE((replay.out + replay.err).find(dir.File("t.txt")), std::string::npos)
      << replay.out << replay.err;
  EXPECT_NE((replay.out + replay.err).find("Permission denied"), std::string::npos)
      << replay.out << replay.err;
}

TEST(Hostile, CalibrateChecksItsDestinationBeforeItStarts) {
  test::TempDir m;
  test::CopyDir(test::FixtureDir("mha_seq_bf16"), m.path());  // vocab 613: fits the tokenizer
  test::CopyDir(test::FixtureDir("tokenizer"), m.path());
  test::WriteFile(m.File("text"), "The falcon flies over the sea.\n");
  const std::vector<std::string> calibrate = {"calibrate", "--model", m.path(), "--text",
                                              m.File("text")};
  ASSERT_EQ(RunWithDeadline(calibrate).exit_code, 0);
  const std::string scales = test::ReadFile(m.File("kv_scales.json"));
  ExpectRefused(calibrate, 1, {"kv_scales.json exists", "--force"});
  std::vector<std::string> forced = calibrate;
  forced.push_back("--force");
  EXPECT_EQ(RunWithDeadline(forced).exit_code, 0);
  EXPECT_EQ(test::ReadFile(m.File("kv_scales.json")), scales);  // same text, same scales
  std::vector<std::string> elsewhere = calibrate;
  elsewhere.insert(elsewhere.end(), {"--out", m.File("other.json")});
  const RunOutcome r = RunWithDeadline(elsewhere);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::ReadFile(m.File("other.json")), scales);
  // An unwritable destination is refused at once, before the measurement.
  std::vector<std::string> nowhere = calibrate;
  nowhere.insert(nowhere.end(), {"--out", "/nonexistent/dir/scales.json"});
  ExpectRefused(nowhere, 1, {"/nonexistent/dir/scales.json", "cannot write"}, 2);
  std::vector<std::string> dir = calibrate;
  dir.insert(dir.end(), {"--out", m.path()});
  ExpectRefused(dir, 1, {"is a directory"});
}

TEST(Hostile, ChatCommandsIgnoreCaseAndTrailingSpaces) {
  for (const char* quit : {"/quit   ", "/QUIT", "/Bye", "  /bye\t"}) {
    const RunOutcome r = RunWithDeadline({"chat", "--seed", "1"}, std::string(quit) + "\n");
    EXPECT_EQ(r.exit_code, 0) << quit << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << quit << ": " << r.out;  // nothing reached the model
  }
  const RunOutcome r = RunWithDeadline({"chat", "--seed", "1"}, "/hepl\n/quit\n");
  EXPECT_NE(r.out.find("did you mean /help?"), std::string::npos) << r.out;
}

TEST(Hostile, KVDTypeAutoIsTheCheckpointsPrecision) {
  // The default --kv-dtype auto: an F32 checkpoint's logits are those of an f32 KV cache (not
  // bf16's, about 1e-3 away), a BF16 checkpoint's those of a bf16 cache.
  for (const auto& [fixture, same, other] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"mq_f32", "f32", "bf16"}, {"mq_bias_bf16", "bf16", "f32"}}) {
    test::TempDir dir;
    auto logits = [&](const std::string& kv) {
      const std::string out = dir.File(kv + ".npy");
      std::vector<std::string> args = {
          "logits", "--model", test::FixtureDir(fixture), "--ids", "1 5 9 13 17 21", "--out", out};
      if (!kv.empty()) args.insert(args.end(), {"--kv-dtype", kv});
      const RunOutcome r = RunWithDeadline(args);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      return test::ReadFile(out);
    };
    const std::string by_default = logits("");
    EXPECT_EQ(by_default, logits(same)) << fixture;
    EXPECT_NE(by_default, logits(other)) << fixture << ": the formats do not differ here";
  }
}

// ---- Every numeric flag of every command, negative and huge ----

struct Command {
  std::vector<std::string> words;  // e.g. {"bench", "serve"}
  std::vector<std::string> args;   // what it needs besides the flag under test
  std::string input;
};

// The numeric flags (INT, UINT, FLOAT) `wormchat WORDS --help` lists.
std::vector<std::string> NumericFlags(const std::vector<std::string>& words) {
  std::vector<std::string> args = words;
  args.push_back("--help");
  const RunOutcome help = RunWithDeadline(args);
  std::vector<std::string> flags;
  std::istringstream in(help.out);
  const std::regex line(R"(^\s+(?:-\w,)?(--[a-z0-9-]+) (INT|UINT|FLOAT)\b)");
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) flags.push_back(m[1]);
  }
  return flags;
}

// The commands, each with what it needs besides the flag under test. `dir` holds the inputs the
// tests write (HostileFlags::SetUp); "" for only the commands' words.
std::vector<Command> FlagCommands(const std::string& d) {
  auto file = [&d](const char* name) { return d + "/" + name; };
  return {
      {{"generate"}, {"--prompt", "hi", "-n", "2"}, ""},
      {{"chat"}, {"-n", "2"}, "hi\n/quit\n"},
      {{"batch"}, {"-i", file("prompts"), "-o", file("out.jsonl"), "-n", "2"}, ""},
      {{"logits"}, {"--ids", "1 2", "--out", file("x.npy")}, ""},
      {{"tokenize"}, {"--text", "hi"}, ""},
      {{"info"}, {}, ""},
      {{"perplexity"}, {"--text", file("text")}, ""},
      {{"calibrate"}, {"--model", file("model"), "--text", file("text"), "--force"}, ""},
      {{"transcript", "record"}, {"--turns", file("turns"), "--out", file("t.txt")}, ""},
      {{"bench", "attention"}, {"--kv-len", "256", "--repeats", "1"}, ""},
      {{"bench", "serve"}, {"--requests", "2", "--gen-len", "2", "--prompt-len", "4"}, ""},
      {{"bench", "beams"}, {"--prompt-tokens", "16", "--new-tokens", "2", "--beams", "2"}, ""},
      {{"bench", "model"},
       {"--prompt-len", "4", "--gen-len", "2", "--decode-rows", "1", "--repeats", "1"},
       ""},
      {{"mesh-bench"}, {"--experiment", "seed-fig3-4", "--csv", file("mesh.csv")}, ""},
  };
}
constexpr int kFlagCommands = 14;

// One command per test (each runs its flags' few hundred processes one after another), so ctest
// spreads the commands over the cores: as one test, this was the suite's long pole.
class HostileFlags : public testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    test::WriteFile(dir_.File("prompts"), "Hello there.\n");
    test::WriteFile(dir_.File("text"), "The falcon flies over the sea. It hunts at dawn.\n");
    test::WriteFile(dir_.File("turns"), "Hello.\n");
    // calibrate writes beside the model: a copy, never assets/.
    const std::string model = dir_.File("model");
    mkdir(model.c_str(), 0755);
    test::CopyDir(test::FixtureDir("mha_seq_bf16"), model);  // vocab 613: fits the tokenizer
    test::CopyDir(test::FixtureDir("tokenizer"), model);
  }
  test::TempDir dir_;
};

TEST_P(HostileFlags, EveryNumericFlagNegativeOrHugeEndsCleanly) {
  // Each run either works (a huge value may be legal, e.g. -n: it stops at the context) or is
  // refused with exit 1 or 2 and one line naming the flag; none crashes, hangs or takes a minute.
  const Command c = FlagCommands(dir_.path())[GetParam()];
  for (const std::string& flag : NumericFlags(c.words)) {
    for (const char* value : {"-7", "2000000000"}) {
      std::vector<std::string> args = c.words;
      args.insert(args.end(), c.args.begin(), c.args.end());
      const auto given = std::find(args.begin(), args.end(), flag);
      if (given != args.end()) {
        *(given + 1) = value;  // a flag of the base arguments: its value replaced
      } else {
        args.push_back(flag);
        args.push_back(value);
      }
      const RunOutcome r = RunWithDeadline(args, c.input, 60);
      const std::string what = Join(args) + "\nstderr: " + r.err;
      EXPECT_FALSE(r.timed_out) << "still running after 60 s: " << what;
      if (r.timed_out) continue;
      EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 2) << what;
      if (r.exit_code != 0) {
        EXPECT_EQ(test::CountLines(r.err), 1) << what;
        EXPECT_EQ(r.err.rfind("wormchat: error: ", 0), 0u) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCommand, HostileFlags, testing::Range(0, kFlagCommands),
                         [](const testing::TestParamInfo<int>& info) {
                           const std::vector<Command> commands = FlagCommands("");
                           std::string name;
                           for (const std::string& w : commands[info.param].words)
                             name += (name.empty() ? "" : "_") + w;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// The flags above are found by reading --help: it must find them.
TEST(Hostile, HelpListsTheNumericFlagsOfEveryCommand) {
  const std::vector<Command> commands = FlagCommands("");
  ASSERT_EQ(static_cast<int>(commands.size()), kFlagCommands);
  size_t flags = 0;
  for (const Command& c : commands) flags += NumericFlags(c.words).size();
  EXPECT_GT(flags, 50u) << "the --help parsing found too few flags";
}

}  // namespace
}  // namespace wc
