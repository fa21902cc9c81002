// wormchat under `mpirun -np 2` on this host (built when CMake finds MPI; not under sanitizers).
// Data-parallel batch: the records equal a single-process run's, from a file or stdin, resuming
// an earlier output; a rank killed mid-run or unable to load its model ends the job with an error
// naming the rank, and the output resumes. Commands that do not split across ranks refuse to run R
// copies of themselves.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "tests/app/batch_test_util.h"
#include "tests/app/http_test_util.h"

namespace wc::test {
namespace {

// Open MPI's settings for tests: run as root (containers), no single-copy shared memory (it needs
// ptrace rights containers lack), more ranks than cores allowed.
void MpiEnvironment() {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
}

std::vector<std::string> MpirunArgv(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {WORMCHAT_MPIRUN, "-np", std::to_string(ranks), WORMCHAT_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

RunResult Mpirun(const std::vector<std::string>& argv, const std::string& input = "") {
  MpiEnvironment();
  return RunProgram(argv, input);
}

// 150 prompts of 16 tokens on 2 user rows a rank: a second or two under mpirun, long enough to
// kill a rank mid-run.
std::string DataParallelInput() {
  std::string s;
  for (int i = 1; i <= 150; ++i) s += "Tell me about the number " + std::to_string(i) + ".\n";
  return s;
}
std::vector<std::string> DataParallelArgs() {
  return {"-n", "16", "--user-rows", "2", "--threads", "1"};
}
const std::string& SingleProcessRecords() {
  static const std::string out = [] {
    TempDir dir;
    const RunResult r = Batch(dir, DataParallelInput(), dir.File("out.jsonl"), DataParallelArgs());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return ReadFile(dir.File("out.jsonl"));
  }();
  return out;
}

std::vector<std::string> BatchArgs(const TempDir& dir) {
  std::vector<std::string> args = {"batch", "-i", dir.File("in.txt"), "-o", dir.File("out.jsonl")};
  for (const std::string& a : DataParallelArgs()) args.push_back(a);
  return args;
}

// The pid of the wormchat process of `rank` whose command line names `marker`, or -1.
pid_t FindRank(int rank, const std::string& marker) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  DIR* proc = opendir("/proc");
  pid_t found = -1;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    const std::string dir = "/proc/" + std::string(e->d_name);
    const std::string cmdline = ReadFile(dir + "/cmdline");
    if (cmdline.rfind(WORMCHAT_BINARY, 0) != 0 || cmdline.find(marker) == std::string::npos)
      continue;
    const std::string env = ReadFile(dir + "/environ");
    if (env.find(want + '\0') != std::string::npos) found = pid;
  }
  closedir(proc);
  return found;
}

// Starts `argv` (an mpirun of batch writing dir/out.jsonl; stdout and stderr to dir/stdout and
// dir/stderr), SIGKILLs rank 1 once the first record is written, and returns mpirun's exit status.
int KillRankOneAfterTheFirstRecord(const std::vector<std::string>& argv, const TempDir& dir) {
  MpiEnvironment();
  const pid_t mpirun = SpawnProgram(argv, dir.File("stdout"), dir.File("stderr"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ReadFile(dir.File("out.jsonl")).find('\n') == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const pid_t rank1 = FindRank(1, dir.File("out.jsonl"));
  EXPECT_GT(rank1, 0) << "rank 1 not found";
  if (rank1 > 0) kill(rank1, SIGKILL);
  return WaitWormchat(mpirun);
}

TEST(MpiTest, DataParallelBatchEqualsTheSingleProcessRecords) {
  TempDir dir;
  WriteFile(dir.File("in.txt"), DataParallelInput());
  const RunResult r = Mpirun(MpirunArgv(2, BatchArgs(dir)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string out = ReadFile(dir.File("out.jsonl"));
  EXPECT_EQ(Records(out).size(), 150u);
  EXPECT_EQ(SortedLines(out), SortedLines(SingleProcessRecords()));
  // Both ranks ran requests; one progress (rank 0's) for the whole job.
  EXPECT_NE(r.err.find("running 150 on 2 ranks x 2 user rows"), std::string::npos) << r.err;
  int ran0 = 0, ran1 = 0;
  const size_t at = r.err.find("requests run per rank: ");
  ASSERT_NE(at, std::string::npos) << r.err;
  ASSERT_EQ(std::sscanf(r.err.c_str() + at, "requests run per rank: rank 0: %d, rank 1: %d", &ran0,
                        &ran1),
            2)
      << r.err;
  EXPECT_GT(ran0, 0);
  EXPECT_GT(ran1, 0);
  EXPECT_EQ(ran0 + ran1, 150);
  EXPECT_NE(r.err.find("150/150 done"), std::string::npos) << r.err;
}

// Data parallel on the other layouts (issue 51): each rank runs a whole Llama-layout or Falcon-RW
// model; the records are a single process's.
TEST(MpiTest, DataParallelBatchOnEveryLayoutEqualsTheSingleProcessRecords) {
  std::string input;
  for (int i = 1; i <= 24; ++i)
    input += std::to_string(i) + " 9 17 " + std::to_string(40 + i) + "\n";
  for (const char* fixture : {"llama_gqa4_f32", "rw_alibi6_bf16"}) {
    TempDir dir;
    WriteFile(dir.File("in.txt"), input);
    const std::vector<std::string> args = {"batch",
                                           "--model",
                                           test::FixtureDir(fixture),
                                           "--ids",
                                           "-i",
                                           dir.File("in.txt"),
                                           "-o",
                                           dir.File("dp.jsonl"),
                                           "-n",
                                           "8",
                                           "--user-rows",
                                           "2",
                                           "--threads",
                                           "1"};
    const RunResult dp = Mpirun(MpirunArgv(2, args));
    ASSERT_EQ(dp.exit_code, 0) << dp.err;
    std::vector<std::string> single = args;
    single[7] = dir.File("one.jsonl");
    const RunResult one = RunWormchat(single);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const std::string out = ReadFile(dir.File("dp.jsonl"));
    EXPECT_EQ(Records(out).size(), 24u) << fixture;
    EXPECT_EQ(SortedLines(out), SortedLines(ReadFile(dir.File("one.jsonl")))) << fixture;
  }
}

// --speculate lookup across ranks: the records equal the single-process run's (and those without
// speculation), and the summary's proposed and accepted tokens are summed over the ranks: the
// same figures as the single-process run's, whichever rank ran which request.
TEST(MpiTest, DataParallelBatchSumsSpeculationOverTheRanks) {
  TempDir dir;
  std::string input;
  for (int i = 1; i <= 24; ++i)
    input += "Say it twice: the number " + std::to_string(i) + " is here, the number " +
             std::to_string(i) + " is here.\n";
  WriteFile(dir.File("in.txt"), input);
  const std::vector<std::string> args = {"-n",        "16", "--user-rows",   "2",
                                         "--threads", "1",  "--temperature", "0"};
  std::vector<std::string> spec_args = args;
  spec_args.insert(spec_args.end(), {"--speculate", "lookup"});
  const RunResult off = Batch(dir, input, dir.File("off.jsonl"), args);
  ASSERT_EQ(off.exit_code, 0) << off.err;
  const RunResult one = Batch(dir, input, dir.File("one.jsonl"), spec_args);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  std::vector<std::string> argv = {"batch", "-i", dir.File("in.txt"), "-o", dir.File("two.jsonl")};
  argv.insert(argv.end(), spec_args.begin(), spec_args.end());
  const RunResult two = Mpirun(MpirunArgv(2, argv));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("two.jsonl"))),
            SortedLines(ReadFile(dir.File("off.jsonl"))));
  EXPECT_EQ(SortedLines(ReadFile(dir.File("one.jsonl"))),
            SortedLines(ReadFile(dir.File("off.jsonl"))));
  auto summary = [](const std::string& err) {
    const size_t at = err.find("batch: speculation: ");
    return at == std::string::npos ? std::string() : err.substr(at, err.find('\n', at) - at);
  };
  ASSERT_FALSE(summary(one.err).empty()) << one.err;
  EXPECT_EQ(summary(two.err), summary(one.err)) << two.err;
  long accepted = 0, proposed = 0;
  ASSERT_EQ(
      std::sscanf(summary(one.err).c_str(), "batch: speculation: %ld/%ld", &accepted, &proposed),
      2);
  EXPECT_GT(accepted, 0);
  EXPECT_GE(proposed, accepted);
  // Both ranks ran requests.
  int ran0 = 0, ran1 = 0;
  const size_t at = two.err.find("requests run per rank: ");
  ASSERT_NE(at, std::string::npos) << two.err;
  ASSERT_EQ(std::sscanf(two.err.c_str() + at, "requests run per rank: rank 0: %d, rank 1: %d",
                        &ran0, &ran1),
            2);
  EXPECT_GT(ran0, 0);
  EXPECT_GT(ran1, 0);
}

TEST(MpiTest, DataParallelBatchReadsStdinAndFailsAsTheSingleProcessRunDoes) {
  // Rank 0 alone has mpirun's stdin; a bad line is an error record and exit status 1, once.
  const std::string input = MixedInput() + "{\"custom_id\": \"bad\", \"body\": 5}\n";
  TempDir dir;
  const RunResult single = Batch(dir, input, dir.File("single.jsonl"), {"-n", "12"});
  ASSERT_EQ(single.exit_code, 1) << single.err;
  const RunResult r =
      Mpirun(MpirunArgv(2, {"batch", "-i", "-", "-o", dir.File("out.jsonl"), "-n", "12"}), input);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("out.jsonl"))),
            SortedLines(ReadFile(dir.File("single.jsonl"))));
  const std::string failed = "1 of 7 requests failed";
  const size_t first = r.err.find(failed);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(failed, first + 1), std::string::npos) << "said by one rank only: " << r.err;
  EXPECT_EQ(r.err.find("MPI_ABORT"), std::string::npos) << "a normal end, not a fault: " << r.err;
}

TEST(MpiTest, AKilledRankEndsTheJobNamingItAndTheOutputResumes) {
  TempDir dir;
  WriteFile(dir.File("in.txt"), DataParallelInput());
  const std::vector<std::string> argv = MpirunArgv(2, BatchArgs(dir));
  EXPECT_NE(KillRankOneAfterTheFirstRecord(argv, dir), 0);
  const std::string err = ReadFile(dir.File("stderr"));
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  const std::string partial = ReadFile(dir.File("out.jsonl"));
  const size_t complete = std::count(partial.begin(), partial.end(), '\n');
  ASSERT_GE(complete, 1u);
  ASSERT_LT(complete, 150u) << "the run ended before the kill; make it longer";
  // What was written is a subset of the single-process records; a rerun completes it.
  const std::vector<std::string> ref = Lines(SingleProcessRecords());
  const std::set<std::string> ref_lines(ref.begin(), ref.end());
  for (const std::string& line : Lines(partial.substr(0, partial.rfind('\n') + 1)))
    EXPECT_EQ(ref_lines.count(line), 1u) << line;
  const RunResult r = Mpirun(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("out.jsonl"))), SortedLines(SingleProcessRecords()));
}

TEST(MpiTest, ARankThatCannotLoadItsModelEndsTheJobNamingIt) {
  // Open MPI's MPMD form: rank 0 with the default model, rank 1 with a directory that is not one.
  TempDir dir;
  WriteFile(dir.File("in.txt"), "Hello\n");
  const std::vector<std::string> batch = {WORMCHAT_BINARY,    "batch", "-i",
                                          dir.File("in.txt"), "-o",    dir.File("out.jsonl")};
  std::vector<std::string> argv = {WORMCHAT_MPIRUN, "-np", "1"};
  argv.insert(argv.end(), batch.begin(), batch.end());
  argv.insert(argv.end(), {":", "-np", "1"});
  argv.insert(argv.end(), batch.begin(), batch.end());
  argv.insert(argv.end(), {"--model", dir.path()});
  const RunResult r = Mpirun(argv);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("wormchat: error: rank 1 of 2: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("config.json: missing"), std::string::npos) << r.err;
}

TEST(MpiTest, CommandsThatDoNotSplitAcrossRanksRefuseToRunTwice) {
  const RunResult r = Mpirun(MpirunArgv(2, {"generate", "-p", "Hello", "-n", "4"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("wormchat generate runs in one process, but mpirun started 2 ranks"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
}

// ---- Tensor parallel: one model split across the ranks ----

RunResult Single(const std::vector<std::string>& args, const std::string& input = "") {
  return RunWormchat(args, input);
}

TEST(MpiTest, TensorParallelGreedyTokensEqualTheSingleProcessRun) {
  const std::vector<std::vector<std::string>> runs = {
      // the default model: grouped KV heads, one group a rank
      {"generate", "--prompt", "Tell me about the sea.", "-n", "48", "--temperature", "0"},
      // beams: rank 0's cache reorders replayed on rank 1
      {"generate", "--prompt", "Once upon a time", "-n", "24", "--beams", "3"},
      // multi-query: the one KV head on both ranks, the query heads split
      {"generate", "--model", test::FixtureDir("mq_f32"), "--ids", "5 9 17 3 44", "-n", "24",
       "--temperature", "0"},
      // the Llama layout (Falcon3): grouped KV heads 4:1, a group a rank, SwiGLU split by rows
      {"generate", "--model", test::FixtureDir("llama_gqa4_f32"), "--ids", "5 9 17 3 44", "-n",
       "24", "--temperature", "0"},
      // Falcon-RW: 6 heads, 3 a rank, each with its own ALiBi slope (the 2 extra slopes on rank 1)
      {"generate", "--model", test::FixtureDir("rw_alibi6_bf16"), "--ids", "5 9 17 3 44", "-n",
       "24", "--temperature", "0"},
  };
  for (const auto& args : runs) {
    const RunResult one = Single(args);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    std::vector<std::string> tp = args;
    tp.insert(tp.end(), {"--tensor-parallel", "2"});
    const RunResult two = Mpirun(MpirunArgv(2, tp));
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(two.out, one.out) << args[2] << " " << args[3];
    EXPECT_FALSE(one.out.empty());
  }
}

// Speculative decoding on 2 ranks (issue 34): the verify chunks are steps rank 0 announces, their
// rollbacks replayed by rank 1; greedy and sampled text is one process's without speculation.
TEST(MpiTest, TensorParallelSpeculationGivesTheTextWithoutIt) {
  const std::vector<std::vector<std::string>> runs = {
      {"generate", "--prompt", "The sea is wide and the sea is deep. The sea is wide", "-n", "40",
       "--temperature", "0"},
      {"generate", "--prompt", "The sea is wide and the sea is deep. The sea is wide", "-n", "30",
       "--seed", "5"},
  };
  for (const auto& args : runs) {
    std::vector<std::string> off = args;
    off.insert(off.end(), {"--speculate", "off"});
    const RunResult one = Single(off);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    std::vector<std::string> tp = args;
    tp.insert(tp.end(),
              {"--speculate", "lookup", "--speculate-k", "8", "--stats", "--tensor-parallel", "2"});
    const RunResult two = Mpirun(MpirunArgv(2, tp));
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(two.out, one.out) << args[6];
    EXPECT_FALSE(one.out.empty());
    int accepted = 0, proposed = 0;
    const size_t at = two.err.find("speculation: ");
    ASSERT_NE(at, std::string::npos) << two.err;
    ASSERT_EQ(std::sscanf(two.err.c_str() + at, "speculation: %d/%d", &accepted, &proposed), 2)
        << two.err;
    EXPECT_GT(proposed, 0) << two.err;
  }
}

TEST(MpiTest, TensorParallelRanksEachHoldAboutHalfTheWeights) {
  const RunResult r = Mpirun(MpirunArgv(
      2, {"generate", "--prompt", "Hi", "-n", "4", "--stats", "--tensor-parallel", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double rank0 = 0, rank1 = 0, all = 0;
  const size_t at = r.err.find("tensor parallel: 2 ranks hold ");
  ASSERT_NE(at, std::string::npos) << r.err;
  ASSERT_EQ(std::sscanf(r.err.c_str() + at,
                        "tensor parallel: 2 ranks hold %lf, %lf MiB of weights (%lf MiB in all)",
                        &rank0, &rank1, &all),
            3)
      << r.err;
  EXPECT_NEAR(rank0, all / 2, all * 0.02);
  EXPECT_NEAR(rank1, all / 2, all * 0.02);
  // `info` predicts the same split without loading anything.
  const RunResult info = Single({"info", "--tensor-parallel", "2", "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const json j = json::parse(info.out);
  EXPECT_NEAR(j["tensor_parallel"]["per_rank"][0]["weight_bytes_held"].get<double>() / 1048576.0,
              rank0, 0.1);
  EXPECT_NEAR(j["weight_bytes_held"].get<double>() / 1048576.0, all, 0.2);
}

TEST(MpiTest, TensorParallelBatchAndPerplexityMatchTheSingleProcessRun) {
  TempDir dir;
  const std::string input = MixedInput();
  const RunResult one = Batch(dir, input, dir.File("one.jsonl"), {"-n", "12"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  WriteFile(dir.File("in.jsonl"), input);
  const RunResult two =
      Mpirun(MpirunArgv(2, {"batch", "-i", dir.File("in.jsonl"), "-o", dir.File("two.jsonl"), "-n",
                            "12", "--tensor-parallel", "2"}));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("two.jsonl"))),
            SortedLines(ReadFile(dir.File("one.jsonl"))));
  // Perplexity: the same tokens scored, within the partial sums' rounding.
  WriteFile(dir.File("text.txt"), LongInput());
  const RunResult p1 = Single({"perplexity", "--text", dir.File("text.txt"), "--json"});
  ASSERT_EQ(p1.exit_code, 0) << p1.err;
  const RunResult p2 = Mpirun(MpirunArgv(
      2, {"perplexity", "--text", dir.File("text.txt"), "--json", "--tensor-parallel", "2"}));
  ASSERT_EQ(p2.exit_code, 0) << p2.err;
  const json a = json::parse(p1.out), b = json::parse(p2.out);
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_NEAR(b["perplexity"].get<double>(), a["perplexity"].get<double>(),
              1e-5 * a["perplexity"].get<double>());
}

// The prefix cache under tensor parallel: the followers replay rank 0's adopt / retain / release
// of cached blocks, so requests that take a shared head from the cache give the single process's
// records with the cache off; --prefix-cache-dir (a rank holds only its heads of a block) is
// refused with one line.
TEST(MpiTest, TensorParallelBatchTakesCachedBlocksAsTheSingleProcessRun) {
  TempDir dir;
  std::string head;
  for (int i = 0; i < 12; ++i) head += "The ship sails north along the cold grey coast. ";
  std::string input;
  for (const char* q : {"Where does it go?", "Who is on board?", "When will it arrive?"})
    input += head + q + "\n";
  const std::vector<std::string> common = {"-n", "8", "--user-rows", "1", "--seed", "4"};
  std::vector<std::string> off = common;
  off.insert(off.end(), {"--prefix-cache", "off"});
  const RunResult one = Batch(dir, input, dir.File("one.jsonl"), off);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  WriteFile(dir.File("in.txt"), input);
  std::vector<std::string> tp = {
      "batch", "-i", dir.File("in.txt"), "-o", dir.File("two.jsonl"), "--tensor-parallel", "2"};
  tp.insert(tp.end(), common.begin(), common.end());
  const RunResult two = Mpirun(MpirunArgv(2, tp));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.err.find(" 0 taken from the prefix cache"), std::string::npos) << two.err;
  EXPECT_NE(two.err.find(" taken from the prefix cache (2 hits"), std::string::npos) << two.err;
  // Equal but for the cached tokens each record reports.
  auto strip = [](const std::string& text) {
    std::vector<std::string> out;
    for (const std::string& line : SortedLines(text)) {
      json rec = json::parse(line);
      rec["response"]["body"]["usage"].erase("prompt_tokens_details");
      out.push_back(rec.dump());
    }
    return out;
  };
  EXPECT_EQ(strip(ReadFile(dir.File("two.jsonl"))), strip(ReadFile(dir.File("one.jsonl"))));
  tp.insert(tp.end(), {"--prefix-cache-dir", dir.File("cache")});
  tp[4] = dir.File("three.jsonl");
  const RunResult bad = Mpirun(MpirunArgv(2, tp));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--prefix-cache-dir is not supported with --tensor-parallel"),
            std::string::npos)
      << bad.err;
}

// `wormchat serve --tensor-parallel 2` under mpirun: rank 0 serves HTTP, rank 1 follows its
// steps; a request's text is one process's `generate` with the same settings, and SIGTERM to
// rank 0 drains and ends the whole job with status 0.
TEST(MpiTest, TensorParallelServeAnswersAsOneProcessAndStopsCleanly) {
  const RunResult one =
      Single({"generate", "--prompt", "What is a chip?", "-n", "16", "--seed", "3", "--temperature",
              "1", "--top-k", "0", "--top-p", "1", "--threads", "1"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  TempDir dir;
  MpiEnvironment();
  const std::string marker = dir.File("key");  // names this job's processes
  WriteFile(marker, "k9\n");
  const pid_t mpirun =
      SpawnProgram(MpirunArgv(2, {"serve", "--port", "0", "--threads", "1", "--api-key-file",
                                  marker, "--tensor-parallel", "2"}),
                   dir.File("stdout"), dir.File("stderr"));
  int port = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (port == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string err = ReadFile(dir.File("stderr"));
    const size_t at = err.find("127.0.0.1:");
    if (at != std::string::npos) port = std::atoi(err.c_str() + at + 10);
  }
  ASSERT_GT(port, 0) << ReadFile(dir.File("stderr"));
  const json body = {
      {"messages", json::array({{{"role", "user"}, {"content", "What is a chip?"}}})},
      {"max_tokens", 16},
      {"seed", 3}};
  for (bool stream : {false, true}) {
    json b = body;
    b["stream"] = stream;
    const std::string r =
        Http(port, "POST", "/v1/chat/completions", b.dump(), "Authorization: Bearer k9\r\n");
    ASSERT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
    std::string text;
    if (!stream) {
      text = json::parse(Body(r))["choices"][0]["message"]["content"].get<std::string>();
    } else {
      const std::string events = Body(r);
      for (size_t at = 0; (at = events.find("data: {", at)) != std::string::npos; ++at) {
        const json chunk = json::parse(events.substr(at + 6, events.find('\n', at) - at - 6));
        const json& delta = chunk["choices"][0]["delta"];
        if (delta.contains("content")) text += delta["content"].get<std::string>();
      }
    }
    EXPECT_EQ(text + "\n", one.out) << (stream ? "streamed" : "whole");
  }
  const pid_t rank0 = FindRank(0, marker);
  ASSERT_GT(rank0, 0) << "rank 0 not found";
  kill(rank0, SIGTERM);
  EXPECT_EQ(WaitWormchat(mpirun), 0) << ReadFile(dir.File("stderr"));
  EXPECT_NE(ReadFile(dir.File("stderr")).find("wormchat serve: stopped"), std::string::npos);
}

TEST(MpiTest, TensorParallelMisuseIsAClearError) {
  // Without mpirun.
  RunResult r = Single({"generate", "--prompt", "Hi", "--tensor-parallel", "2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--tensor-parallel 2 runs under mpirun -np 2, but this run has 1 process"),
            std::string::npos)
      << r.err;
  // Ranks and --tensor-parallel disagree.
  r = Mpirun(MpirunArgv(2, {"generate", "--prompt", "Hi", "--tensor-parallel", "3"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--tensor-parallel 3 runs under mpirun -np 3, but this run has 2 ranks"),
            std::string::npos)
      << r.err;
  // Five query heads and one KV head do not split in two.
  r = Mpirun(MpirunArgv(2, {"generate", "--model", test::FixtureDir("mq_bias_bf16"), "--ids",
                            "1 2 3", "--tensor-parallel", "2"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--tensor-parallel 2 must divide the model's 1 KV heads (or, with one KV "
                       "head, its 5 query heads)"),
            std::string::npos)
      << r.err;
}

TEST(MpiTest, TensorParallelBatchWithAKilledRankEndsNamingItAndResumes) {
  TempDir dir;
  WriteFile(dir.File("in.txt"), DataParallelInput());
  std::vector<std::string> args = BatchArgs(dir);
  args.insert(args.end(), {"--tensor-parallel", "2"});
  EXPECT_NE(KillRankOneAfterTheFirstRecord(MpirunArgv(2, args), dir), 0);
  EXPECT_NE(ReadFile(dir.File("stderr")).find("rank 1"), std::string::npos);
  const std::string partial = ReadFile(dir.File("out.jsonl"));
  ASSERT_LT(std::count(partial.begin(), partial.end(), '\n'), 150) << "make the run longer";
  // A single-process rerun finishes it with the single-process records.
  const RunResult r = Single(BatchArgs(dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("out.jsonl"))), SortedLines(SingleProcessRecords()));
}

TEST(MpiTest, BenchRanksMeasuresBothSplitsAgainstOneRank) {
  TempDir dir;
  const RunResult r =
      Mpirun(MpirunArgv(2, {"bench", "ranks", "--requests", "8", "--prompt-len", "8", "-n", "4",
                            "--decode", "8", "--json", dir.File("b.json")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("bench ranks: 2 ranks"), std::string::npos) << r.out;
  const json j = json::parse(ReadFile(dir.File("b.json")));
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_GT(j["one_rank"]["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(j["tensor_parallel"]["decode_tok_s"].get<double>(), 0);
  // One all-reduce a layer of the default model (3 layers, parallel attention), hidden_size f32s
  // (plus the two votes) per token.
  EXPECT_NEAR(j["tensor_parallel"]["reduce_calls_per_token"].get<double>(), 3, 1e-9);
  EXPECT_NEAR(j["tensor_parallel"]["reduce_bytes_per_token"].get<double>(), 3 * (512 + 2) * 4,
              1e-6);
  const auto held = j["tensor_parallel"]["weight_bytes_held"];
  EXPECT_NEAR(held[0].get<double>(), held[1].get<double>(), held[0].get<double>() * 0.01);
  EXPECT_EQ(j["data_parallel"]["requests_per_rank"][0].get<int>() +
                j["data_parallel"]["requests_per_rank"][1].get<int>(),
            8);
  EXPECT_GT(j["data_parallel"]["batch_tok_s"].get<double>(), 0);
}

}  // namespace
}  // namespace wc::test
