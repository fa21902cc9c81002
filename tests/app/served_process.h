// `wormchat serve` as a process for the tests that talk to the real binary (serve_cli_test, the
// chat's --server tests): started on a free port of 127.0.0.1 with --threads 1, its port read from
// its "listening on" line, killed when the test ends unless Stop() ended it.
#pragma once

#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace wc::test {

struct Served {
  TempDir dir;
  pid_t pid = -1;
  int port = 0;  // 0: it did not start listening within 30 s (dir.File("err") says why)
  explicit Served(std::vector<std::string> args) {
    args.insert(args.begin(), {"serve", "--port", "0", "--threads", "1"});
    pid = SpawnWormchat(args, dir.File("out"), dir.File("err"));
    for (int i = 0; i < 600 && port == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const std::string err = ReadFile(dir.File("err"));
      const size_t at = err.find("127.0.0.1:");
      if (at != std::string::npos) port = std::stoi(err.substr(at + 10));
    }
  }
  ~Served() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      WaitWormchat(pid);
    }
  }
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;
  // SIGTERM, then its exit status.
  int Stop() {
    kill(pid, SIGTERM);
    const int status = WaitWormchat(pid);
    pid = -1;
    return status;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

}  // namespace wc::test
