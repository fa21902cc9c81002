// The wormchat subcommands. Each Register* adds one CLI11 subcommand whose options live in one
// Options struct in its own file; the callback runs the command. Errors are thrown as wc::Error
// and printed by main().
#pragma once

#include <CLI/CLI.hpp>

namespace wc {

void RegisterGenerate(CLI::App& app);
void RegisterChat(CLI::App& app);
void RegisterBatch(CLI::App& app);
void RegisterLogits(CLI::App& app);
void RegisterTokenize(CLI::App& app);
void RegisterInfo(CLI::App& app);
void RegisterInit(CLI::App& app);
void RegisterConvert(CLI::App& app);
void RegisterMeshBench(CLI::App& app);
void RegisterBench(CLI::App& app);
void RegisterPerplexity(CLI::App& app);
void RegisterCalibrate(CLI::App& app);
void RegisterTranscript(CLI::App& app);
void RegisterServe(CLI::App& app);

}  // namespace wc
