// `wormchat chat`: talk with the model. The conversation runs on the serving loop (app/chat/
// chat_session.h); this file reads the options and picks the front end: line mode when stdin or
// stdout is not a terminal or with --plain.
#include <unistd.h>

#include <memory>
#include <string>

#include "app/chat/chat_plain.h"
#include "app/chat/chat_session.h"
#include "app/commands/commands.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "app/rank_lifecycle.h"
#include "app/tui/chat_tui.h"
#include "util/error.h"

namespace wc {
namespace {

struct ChatCmdOptions {
  ModelRunOptions run = ServingRunDefaults();
  int max_new_tokens = 256;
  SamplingParams sampling;
  uint64_t seed = 0;
  bool seed_given = false;  // --seed; else one from the system's entropy
  int beams = 0;            // --beams / `/beams W`: 0 samples, else beam search with W beams
  std::string system;       // --system
  bool plain = false;       // --plain
};

void RunChat(const ChatCmdOptions& o) {
  if (FollowUnlessTensorParallelLeader(o.run) == RankRole::kFollowed) return;
  o.sampling.Validate();
  if (o.max_new_tokens < 1) throw Error(Cat("-n must be >= 1, got ", o.max_new_tokens));
  if (o.beams < 0 || o.beams > kMaxBeams)
    throw Error(Cat("--beams must be in [0, ", kMaxBeams, "] (0: sample), got ", o.beams));
  ConversationSettings s;
  s.sampling = o.sampling;
  s.seed = o.seed_given ? o.seed : EntropySeed();
  s.max_new_tokens = o.max_new_tokens;
  s.system = o.system;
  if (o.beams > 0) {
    BeamParams b;
    b.num_beams = o.beams;
    s.beams = b;
  }
  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/true);
  ChatSession session(m, o.run, s);
  const bool terminal = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  if (terminal && !o.plain)
    RunChatTui(session);
  else
    RunPlainChat(session, /*banner=*/isatty(STDIN_FILENO));
}

}  // namespace

void RegisterChat(CLI::App& app) {
  auto o = std::make_shared<ChatCmdOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "Chat with the model");
  AddModelRunOptions(cmd, o->run);
  AddTensorParallelOption(cmd, o->run);
  AddPrefixCacheOption(cmd, o->run);
  AddIdsFlag(cmd, o->run);
  cmd->add_option("-n,--max-new-tokens", o->max_new_tokens, "Most tokens per reply")
      ->capture_default_str();
  AddSamplingOptions(cmd, o->sampling, o->seed);
  cmd->add_option("--beams", o->beams,
                  "Reply by beam search with W beams (1-16; 0 samples); /beams W changes it")
      ->capture_default_str();
  cmd->add_option("--system", o->system,
                  "A system prompt, framed before the conversation and kept when old turns are "
                  "dropped to fit the context");
  cmd->add_flag("--plain", o->plain, "Line mode even on a terminal");
  cmd->callback([o, cmd] {
    o->seed_given = cmd->count("--seed") > 0;
    ApplyGenerationDefaults(*cmd, o->run.model_dir, &o->sampling, &o->max_new_tokens);
    RunChat(*o);
  });
}

}  // namespace wc
