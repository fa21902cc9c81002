// `wormchat tokenize`: the token ids of a text, on one line.
#include <cstdio>
#include <memory>

#include "app/commands/commands.h"
#include "app/model_options.h"
#include "util/error.h"

namespace wc {
namespace {

struct TokenizeCmdOptions {
  std::string model_dir;
  std::string text;
};

void RunTokenize(const TokenizeCmdOptions& o) {
  const std::string dir = o.model_dir.empty() ? DefaultModelDir() : o.model_dir;
  const auto tok = Tokenizer::FromModelDir(dir);
  const std::vector<int> ids = tok->Encode(o.text);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
}

}  // namespace

void RegisterTokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Print the token ids of a text (no BOS/EOS added; special tokens written in it are matched, "
      "as Hugging Face's encode(text, add_special_tokens=False))");
  cmd->add_option(
      "--model", o->model_dir,
      "Model directory holding tokenizer.model (sentencepiece) or tokenizer.json (Hugging Face)");
  cmd->add_option("--text", o->text, "Text to tokenize")->required();
  int threads = 0;  // accepted for uniformity; tokenizing is single-threaded
  cmd->add_option("--threads", threads, "Host threads (unused here)")
      ->check(CLI::Range(0, kMaxThreads));
  cmd->callback([o] { RunTokenize(*o); });
}

}  // namespace wc
