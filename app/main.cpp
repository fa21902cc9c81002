// wormchat: a Falcon chatbot and inference engine for the CPU. This file only dispatches to the
// subcommands (app/commands.h) and turns every error into one line on stderr and a non-zero exit.
#include <cstdio>
#include <exception>

#include "app/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "wormchat: chat with, batch-run and regression-test a Falcon-shaped model on the CPU"};
  app.set_version_flag("--version", std::string("wormchat ") + WORMCHAT_VERSION);
  app.require_subcommand(1);
  // Usage errors on one line, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("wormchat: error: ") + e.what() + " (see --help)\n";
  });
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
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
  return 0;
}
