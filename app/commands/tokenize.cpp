// `wormchat tokenize`: the token ids of a text, on one line; with --chat, the ids `generate` feeds
// for it as a prompt (framed by the model's chat format or chat template), so a user sees what a
// checkpoint's template makes of a turn.
#include <cstdio>
#include <memory>

#include "app/commands/commands.h"
#include "app/model_options.h"
#include "model/chat/chat_format.h"
#include "model/config.h"
#include "model/model_tokenizer.h"
#include "tokenizer/gguf_tokenizer.h"
#include "util/error.h"

namespace wc {
namespace {

struct TokenizeCmdOptions {
  std::string model_dir;
  std::string text;
  bool chat = false;
  std::string chat_format;        // --chat-format FILE
  bool no_bos = false;            // a GGUF model: llama-tokenize's --no-bos
  bool no_parse_special = false;  // a GGUF model: llama-tokenize's --no-parse-special
};

void RunTokenize(const TokenizeCmdOptions& o) {
  const std::string dir = o.model_dir.empty() ? DefaultModelDir() : o.model_dir;
  const auto tok = LoadModelTokenizer(dir);
  if ((o.no_bos || o.no_parse_special) && dynamic_cast<const GgufTokenizer*>(tok.get()) == nullptr)
    throw Error("--no-bos and --no-parse-special are for a GGUF model (--model FILE.gguf)");
  if ((o.no_bos || o.no_parse_special) && o.chat)
    throw Error("--no-bos and --no-parse-special do not apply with --chat");
  std::vector<int> ids;
  if (o.chat) {
    const std::optional<ChatFormat> format = ChatFormat::ForModel(dir, o.chat_format);
    if (!format)
      throw Error(Cat(dir,
                      " has no chat_format.json and no chat template: --chat has nothing to "
                      "frame with (give --chat-format FILE)"));
    ids = EncodePrompt(*tok, format, o.text, /*raw=*/false, LoadConfig(dir).bos_token_id);
  } else {
    if (!o.chat_format.empty()) throw Error("--chat-format needs --chat");
    if (const auto* gguf = dynamic_cast<const GgufTokenizer*>(tok.get())) {
      // llama-tokenize's defaults: BOS (and EOS) as the vocabulary adds them, specials parsed.
      ids = gguf->Encode(o.text, gguf->adds_bos() && !o.no_bos, !o.no_parse_special);
    } else {
      ids = tok->Encode(o.text);
    }
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
}

}  // namespace

void RegisterTokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Print the token ids of a text. A model directory: no BOS/EOS added, special tokens written "
      "in it matched, as Hugging Face's encode(text, add_special_tokens=False). A GGUF file: "
      "llama.cpp's llama-tokenize ids (BOS/EOS as the file's add_bos_token/add_eos_token add "
      "them, control and user-defined tokens written in the text matched)");
  cmd->add_option(
         "--model", o->model_dir,
         "Model directory holding tokenizer.model (sentencepiece) or tokenizer.json (Hugging "
         "Face), or a GGUF file (its tokenizer.ggml.* vocabulary)")
      ->transform(ModelPathTransform());
  cmd->add_option("--text", o->text, "Text to tokenize")->required();
  cmd->add_flag("--chat", o->chat,
                "Frame the text as one user turn with the model's chat format or chat template, "
                "as generate feeds a prompt without --raw (BOS included when the format has one)");
  cmd->add_option("--chat-format", o->chat_format,
                  "With --chat: a chat_format.json to frame with instead of the model's");
  cmd->add_flag("--no-bos", o->no_bos,
                "GGUF model: add no BOS/EOS (llama-tokenize --no-bos: add_special off)");
  cmd->add_flag("--no-parse-special", o->no_parse_special,
                "GGUF model: control tokens written in the text are text (llama-tokenize "
                "--no-parse-special; user-defined tokens are still matched, as there)");
  int threads = 0;  // accepted for uniformity; tokenizing is single-threaded
  cmd->add_option("--threads", threads, "Host threads (unused here)")
      ->check(CLI::Range(0, kMaxThreads));
  cmd->callback([o] { RunTokenize(*o); });
}

}  // namespace wc
