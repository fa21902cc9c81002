// wormchat: a Falcon chatbot and inference engine for the CPU. This file only dispatches to the
// subcommands (app/commands/commands.h) and turns every error into one line on stderr and a
// non-zero exit.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "app/cli_errors.h"
#include "app/commands/commands.h"
#include "dist/communicator.h"
#include "kernels/simd_limit.h"
#include "util/error.h"

namespace {

// A command's error on stderr as one line. Under mpirun with other ranks (which may be waiting on
// this one in a collective) the line names this rank and the whole job ends, instead of hanging.
int Fail(std::string message, int code) {
  std::fflush(stdout);
  wc::Communicator* world = wc::WorldIfStarted();
  const bool distributed = world != nullptr && world->size() > 1;
  if (distributed && message.rfind("rank ", 0) != 0)
    message = wc::Cat("rank ", world->rank(), " of ", world->size(), ": ", message);
  std::fprintf(stderr, "wormchat: error: %s\n", message.c_str());
  std::fflush(stderr);
  if (distributed) world->Abort(code);
  return code;
}

// Under mpirun with several ranks, only the commands that split their work across ranks run:
// the others would run R copies of themselves.
std::string RanksMessage(int argc, char** argv) {
  if (argc < 2) return {};
  const std::string command = argv[1];
  if (command == "batch" || command.empty() || command[0] == '-') return {};
  if (command == "bench" && argc > 2 && std::strcmp(argv[2], "ranks") == 0) return {};
  for (int i = 2; i < argc; ++i)  // the model split across the ranks: they run it together
    if (std::strncmp(argv[i], "--tensor-parallel", 17) == 0) return {};
  const wc::Communicator& world = wc::World();
  if (world.size() <= 1) return {};
  return wc::Cat("wormchat ", command, " runs in one process, but mpirun started ", world.size(),
                 " ranks; under mpirun, run batch (its requests are shared out across the ranks) "
                 "or a command with --tensor-parallel ",
                 world.size(), " (the model split across the ranks)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "wormchat: chat with, batch-run and regression-test a Falcon-shaped model on the CPU"};
  app.set_version_flag("--version", std::string("wormchat ") + WORMCHAT_VERSION);
  app.require_subcommand(1);

  wc::RegisterChat(app);
  wc::RegisterGenerate(app);
  wc::RegisterBatch(app);
  wc::RegisterLogits(app);
  wc::RegisterTokenize(app);
  wc::RegisterInfo(app);
  wc::RegisterInit(app);
  wc::RegisterMeshBench(app);
  wc::RegisterBench(app);
  wc::RegisterPerplexity(app);
  wc::RegisterCalibrate(app);
  wc::RegisterTranscript(app);
  // Usage errors: one line, status 2 (--help and --version: their text, status 0).
  const std::string unknown = wc::UnknownSubcommandMessage(app, argc, argv);
  if (!unknown.empty()) {
    std::fprintf(stderr, "wormchat: error: %s\n", unknown.c_str());
    return wc::kExitUsage;
  }
  try {
    wc::ApplySimdLimit();  // WORMCHAT_SIMD, before any kernel runs
    const std::string ranks = RanksMessage(argc, argv);
    if (!ranks.empty()) {
      if (wc::World().rank() == 0) std::fprintf(stderr, "wormchat: error: %s\n", ranks.c_str());
      return wc::kExitUsage;
    }
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {  // a command's own exit status (transcript replay)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "wormchat: error: %s\n", wc::UsageMessage(app, e).c_str());
    return wc::kExitUsage;
  } catch (const wc::Error& e) {
    return Fail(e.what(), 1);
  } catch (const std::bad_alloc&) {
    return Fail("out of memory; lower --ctx or use a smaller model", 1);
  } catch (const std::exception& e) {
    return Fail(wc::Cat("internal error: ", e.what()), 70);
  }
  // Output that could not be written (a full disk, a closed pipe) is a failure, not a success.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "wormchat: error: writing standard output failed: %s\n",
                 std::strerror(errno));
    return 1;
  }
  return 0;
}
