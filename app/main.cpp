// wormchat: a Falcon chatbot and inference engine for the CPU. This file only dispatches to the
// subcommands (app/commands/commands.h) and turns every error into one line on stderr and a
// non-zero exit.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "app/cli_errors.h"
#include "app/commands/commands.h"
#include "app/rank_lifecycle.h"
#include "dist/communicator.h"
#include "kernels/simd_limit.h"
#include "util/error.h"
#include "util/memory.h"

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

// Under mpirun with several ranks, a command that runs in one process: every rank refuses it, rank
// 0 says why.
int Refuse(const std::string& message) {
  if (wc::World().rank() == 0) std::fprintf(stderr, "wormchat: error: %s\n", message.c_str());
  return wc::kExitUsage;
}

// The exit status of a CLI11 error: --help and --version print their text (status 0), a command's
// own status (transcript replay), or a usage error as one line (status 2).
int CliStatus(const CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::Success*>(&e) != nullptr) return app.exit(e);
  if (dynamic_cast<const CLI::RuntimeError*>(&e) != nullptr) return e.get_exit_code();
  std::fflush(stdout);
  std::fprintf(stderr, "wormchat: error: %s\n", wc::UsageMessage(app, e).c_str());
  return wc::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  wc::KeepFreedHeapMemory();
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
  wc::RegisterConvert(app);
  wc::RegisterMeshBench(app);
  wc::RegisterBench(app);
  wc::RegisterPerplexity(app);
  wc::RegisterCalibrate(app);
  wc::RegisterTranscript(app);
  wc::RegisterServe(app);
  wc::RefuseCommandsThatRunInOneProcess(app);
  // Usage errors: one line, status 2 (--help and --version: their text, status 0).
  const std::string unknown = wc::UnknownSubcommandMessage(app, argc, argv);
  if (!unknown.empty()) {
    std::fprintf(stderr, "wormchat: error: %s\n", unknown.c_str());
    return wc::kExitUsage;
  }
  try {
    wc::ApplySimdLimit();  // WORMCHAT_SIMD, before any kernel runs
    app.parse(argc, argv);
  } catch (const wc::RanksRefusal& e) {
    return Refuse(e.what());
  } catch (const CLI::ParseError& e) {
    // The refusal comes first, as if the command's flags had not been looked at.
    const std::string refusal = wc::RanksRefusalMessage(app);
    return refusal.empty() ? CliStatus(app, e) : Refuse(refusal);
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
