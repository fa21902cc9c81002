// wormchat: a Falcon chatbot and inference engine for the CPU. This file only dispatches to the
// subcommands (app/commands.h) and turns every error into one line on stderr and a non-zero exit.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "app/cli_errors.h"
#include "app/commands.h"
#include "kernels/simd_limit.h"
#include "util/error.h"

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
    std::fflush(stdout);
    std::fprintf(stderr, "wormchat: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "wormchat: error: out of memory; lower --ctx or use a smaller model\n");
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "wormchat: %s\n", e.what());
    return 70;
  }
  // Output that could not be written (a full disk, a closed pipe) is a failure, not a success.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "wormchat: error: writing standard output failed: %s\n",
                 std::strerror(errno));
    return 1;
  }
  return 0;
}
