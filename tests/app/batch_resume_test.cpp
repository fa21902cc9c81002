// `wormchat batch` resumes: after SIGKILL mid-run, after a clean SIGTERM, on a complete output, and
// over a torn last line - always ending with exactly the records of an uninterrupted run.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/app/batch_test_util.h"

namespace wc::test {
namespace {

TEST(BatchTest, ResumesAfterSigkillWithTheUninterruptedRecords) {
  const std::string& reference = LongReference();
  ASSERT_EQ(Records(reference).size(), kLongCount);
  TempDir dir;
  WriteFile(dir.File("in.txt"), LongInput());
  std::vector<std::string> args = {"batch", "-i", dir.File("in.txt"), "-o", dir.File("out.jsonl")};
  const std::vector<std::string> long_args = LongArgs();
  args.insert(args.end(), long_args.begin(), long_args.end());
  const pid_t pid = SpawnWormchat(args, dir.File("stdout"), dir.File("stderr"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ReadFile(dir.File("out.jsonl")).find('\n') == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, SIGKILL);
  EXPECT_EQ(WaitWormchat(pid), 128 + SIGKILL);
  const std::string partial = ReadFile(dir.File("out.jsonl"));
  const size_t complete = std::count(partial.begin(), partial.end(), '\n');
  ASSERT_GE(complete, 1u);
  ASSERT_LT(complete, kLongCount) << "the run ended before it was killed; make it longer";
  const RunResult r = RunWormchat(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string resumed = ReadFile(dir.File("out.jsonl"));
  EXPECT_EQ(Records(resumed).size(), kLongCount);
  EXPECT_EQ(SortedLines(resumed), SortedLines(reference));
  // What survived the kill was kept as it was, ahead of the rest.
  const size_t kept = partial.rfind('\n') + 1;
  EXPECT_EQ(resumed.substr(0, kept), partial.substr(0, kept));
}

TEST(BatchTest, SigtermCancelsCleanlyAndResumes) {
  const std::string& reference = LongReference();
  TempDir dir;
  WriteFile(dir.File("in.txt"), LongInput());
  std::vector<std::string> args = {"batch", "-i", dir.File("in.txt"), "-o", dir.File("out.jsonl"),
                                   "-n",    "16", "--user-rows",      "2"};
  const pid_t pid = SpawnWormchat(args, dir.File("stdout"), dir.File("stderr"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ReadFile(dir.File("out.jsonl")).find('\n') == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitWormchat(pid), 128 + SIGTERM);
  const std::string partial = ReadFile(dir.File("out.jsonl"));
  ASSERT_FALSE(partial.empty());
  EXPECT_EQ(partial.back(), '\n');  // no torn line: the run stopped between records
  const auto recs = Records(partial);
  ASSERT_LT(recs.size(), kLongCount) << "the run ended before SIGTERM; make it longer";
  const std::vector<std::string> ref = Lines(reference);
  const std::set<std::string> ref_lines(ref.begin(), ref.end());
  for (const std::string& line : Lines(partial))  // no record for a cancelled request
    EXPECT_EQ(ref_lines.count(line), 1u) << line;
  EXPECT_NE(ReadFile(dir.File("stderr")).find("SIGTERM"), std::string::npos);
  const RunResult r = RunWormchat(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("out.jsonl"))), SortedLines(reference));
}

TEST(BatchTest, RerunOnACompleteOutputAddsNothing) {
  const std::string& reference = LongReference();
  TempDir dir;
  WriteFile(dir.File("out.jsonl"), reference);
  const RunResult r = Batch(dir, LongInput(), dir.File("out.jsonl"), {"-n", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFile(dir.File("out.jsonl")), reference);
  EXPECT_NE(r.err.find(std::to_string(kLongCount) + " already in"), std::string::npos) << r.err;
}

TEST(BatchTest, TornLastLineIsCutAwayAndRedone) {
  const std::string& reference = LongReference();
  const std::vector<std::string> lines = Lines(reference);
  std::string head;
  for (size_t i = 0; i + 1 < lines.size(); ++i) head += lines[i] + "\n";
  const std::string& last = lines.back();
  for (const std::string& torn :
       {last.substr(0, last.size() / 2), last, last.substr(0, 3), last.substr(0, 40) + "\n"}) {
    TempDir dir;
    WriteFile(dir.File("out.jsonl"), head + torn);
    const RunResult r = Batch(dir, LongInput(), dir.File("out.jsonl"), {"-n", "16"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("torn last line"), std::string::npos) << r.err;
    const std::string out = ReadFile(dir.File("out.jsonl"));
    EXPECT_EQ(out, head + last + "\n");
  }
  // A line that is not the writer's, even a last one, is never cut: the file is left alone.
  for (const std::string& foreign : {"garbage\n" + reference, head + "a note"}) {
    TempDir dir;
    WriteFile(dir.File("out.jsonl"), foreign);
    const RunResult r = Batch(dir, LongInput(), dir.File("out.jsonl"), {"-n", "16"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("is not a batch record"), std::string::npos) << r.err;
    EXPECT_EQ(ReadFile(dir.File("out.jsonl")), foreign);
  }
}

}  // namespace
}  // namespace wc::test
