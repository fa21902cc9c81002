// `wormchat chat`: talk with the model. The conversation runs on the serving loop (app/chat/
// chat_session.h); this file reads the options and picks the front end: line mode when stdin or
// stdout is not a terminal or with --plain.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "app/chat/chat_plain.h"
#include "app/chat/chat_session.h"
#include "app/chat/chat_store.h"
#include "app/commands/commands.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "app/rank_lifecycle.h"
#include "app/speculation.h"
#include "app/transcript/run_header.h"
#include "app/tui/chat_tui.h"
#include "serving/transcript.h"
#include "util/error.h"

namespace wc {
namespace {

struct ChatCmdOptions {
  ModelRunOptions run = ServingRunDefaults();
  int max_new_tokens = kDefaultMaxNewTokens;
  SamplingParams sampling;
  uint64_t seed = 0;
  bool seed_given = false;         // --seed; else one from the system's entropy
  int beams = 0;                   // --beams / `/beams W`: 0 samples, else beam search with W beams
  std::string system;              // --system
  bool plain = false;              // --plain
  bool no_save = false;            // --no-save
  std::string chats_dir;           // --chats-dir ("" = DefaultChatsDir())
  bool resume = false;             // --resume given
  std::string resume_name;         // its NAME ("" = the most recent)
  bool model_given = false;        // --model given (it overrides a resumed chat's)
  bool speculation_given = false;  // a --speculate flag given (it overrides a resumed chat's)
  std::string render = "markdown";  // --render: markdown or plain (the full-screen chat's)
  bool no_mouse = false;            // --no-mouse
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
  ChatKeep keep;
  keep.save = !o.no_save;
  keep.dir = o.chats_dir;
  ModelRunOptions run = o.run;
  Transcript saved;
  if (o.resume) {
    // The saved chat's model and run options, unless --model says which model.
    const std::string dir = o.chats_dir.empty() ? DefaultChatsDir() : o.chats_dir;
    keep.file = FindChat(dir, o.resume_name);
    saved = ReadTranscriptFile(keep.file);
    run = RunOptionsFromTranscript(saved);
    run.threads = o.run.threads;
    run.prefix_cache = o.run.prefix_cache;
    run.prefix_cache_dir = o.run.prefix_cache_dir;
    run.prefix_cache_dir_max_mb = o.run.prefix_cache_dir_max_mb;
    run.tensor_parallel = o.run.tensor_parallel;
    if (o.model_given) run.model_dir = o.run.model_dir;
    if (o.speculation_given) run.speculation = o.run.speculation;
    s = saved.settings;
  }
  LoadedModel m = LoadModel(run, /*need_tokenizer=*/true);
  LoadDraftModel(run.speculation, run, m, /*user_rows=*/kMaxBeams);  // the chat loop's rows
  if (o.resume && !o.model_given) {
    const std::string fingerprint = RunFingerprint(run, m);
    if (fingerprint != saved.fingerprint)
      throw Error(Cat("--resume: ", keep.file, " was saved with another model (fingerprint ",
                      saved.fingerprint, "; ", m.dir, " has ", fingerprint,
                      "): pass --model with the model to continue it on"));
    keep.fingerprint = fingerprint;  // the session saves under it without computing it again
  }
  ChatSession session(m, run, s, keep);
  if (o.resume) {
    const bool tty = isatty(STDERR_FILENO);
    const std::string line = session.Resume([tty](int fed, int total) {
      if (tty) std::fprintf(stderr, "\rresuming: re-prefilling %d of %d tokens\x1b[K", fed, total);
    });
    if (tty) std::fprintf(stderr, "\r\x1b[K");
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  const bool terminal = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  if (terminal && !o.plain) {
    ChatTuiOptions tui;
    tui.markdown = o.render == "markdown";
    tui.mouse = !o.no_mouse;
    RunChatTui(session, tui);
  } else {
    RunPlainChat(session, /*banner=*/isatty(STDIN_FILENO));
  }
}

}  // namespace

void RegisterChat(CLI::App& app) {
  auto o = std::make_shared<ChatCmdOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "Chat with the model");
  AddModelRunOptions(cmd, o->run);
  AddTensorParallelOption(cmd, o->run);
  AddPrefixCacheOption(cmd, o->run);
  AddIdsFlag(cmd, o->run);
  AddMaxNewTokensOption(cmd, o->max_new_tokens, "Most tokens per reply");
  AddSamplingOptions(cmd, o->sampling, o->seed);
  AddRunOption(cmd, run_option::kBeams, o->beams,
               "Reply by beam search with W beams (0 = sample); /beams W changes it");
  AddSpeculationOptions(cmd, o->run.speculation);
  cmd->add_option("--system", o->system,
                  "A system prompt, framed before the conversation and kept when old turns are "
                  "dropped to fit the context");
  cmd->add_flag("--plain", o->plain, "Line mode even on a terminal");
  cmd->add_option("--render", o->render,
                  "How the full-screen chat shows replies: markdown (headings, lists, code blocks "
                  "with syntax colours) or plain (as the model wrote them); /set render changes "
                  "it. Line mode always prints them as written")
      ->check(CLI::IsMember({"markdown", "plain"}))
      ->capture_default_str();
  cmd->add_flag("--no-mouse", o->no_mouse,
                "Leave the mouse to the terminal: the wheel does not scroll the chat, and "
                "selecting text needs no modifier key (with the mouse on: Shift-drag)");
  cmd->add_flag("--no-save", o->no_save,
                "Do not keep this chat (chats are saved after every turn, to resume later)");
  cmd->add_option("--chats-dir", o->chats_dir,
                  "Where chats are kept (default: $XDG_DATA_HOME/wormchat/chats, or "
                  "~/.local/share/wormchat/chats)");
  cmd->add_option("--resume", o->resume_name,
                  "Continue a saved chat: the most recent, or NAME (a name /chats lists, or the "
                  "start of one)")
      ->expected(0, 1);
  cmd->callback([o, cmd] {
    o->seed_given = cmd->count("--seed") > 0;
    o->resume = cmd->count("--resume") > 0;
    o->model_given = cmd->count("--model") > 0;
    o->speculation_given = cmd->count("--speculate") + cmd->count("--speculate-k") +
                               cmd->count("--lookup-ngram") + cmd->count("--draft-model") >
                           0;
    CheckSpeculation(*cmd, o->run.speculation, o->beams);
    if (o->resume && o->no_save)
      throw Error("--resume continues a saved chat in its file; it cannot go with --no-save");
    ApplyGenerationDefaults(*cmd, o->run.model_dir, &o->sampling, &o->max_new_tokens);
    RunChat(*o);
  });
}

}  // namespace wc
