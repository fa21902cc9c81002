// `wormchat chat`: talk with the model. The conversation runs on the serving loop in this process
// (app/chat/local_chat_session.h), or with --server URL as a client of `wormchat serve` or any
// OpenAI-compatible server (app/chat/remote_chat_session.h); this file reads the options and picks
// the session and the front end: line mode when stdin or stdout is not a terminal or with --plain.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "app/chat/chat_plain.h"
#include "app/chat/chat_store.h"
#include "app/chat/local_chat_session.h"
#include "app/chat/remote_chat_session.h"
#include "app/commands/commands.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "app/openai/api_key_file.h"
#include "app/openai/chat_client.h"
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
  std::string render = "markdown";    // --render: markdown or plain (the full-screen chat's)
  bool no_mouse = false;              // --no-mouse
  std::string server;                 // --server URL ("": the model in this process)
  std::string api_key, api_key_file;  // --api-key, --api-key-file
  std::string server_model;  // --server-model ("": the server's first, or a resumed chat's)
};

// The options a chat with a server takes (the rest choose or run the model here).
bool ServerChatOption(const std::string& name) {
  static const char* const kNames[] = {
      "--server",   "--api-key", "--api-key-file",   "--server-model", "--seed",  "--temperature",
      "--top-k",    "--top-p",   "--max-new-tokens", "--system",       "--plain", "--render",
      "--no-mouse", "--no-save", "--chats-dir",      "--resume",       "--help"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

// Runs the front end the terminal calls for on `session`.
void RunFrontEnd(ChatSession& session, const ChatCmdOptions& o) {
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

// --server URL (or a resumed chat kept from a server): the conversation here, replies there.
void RunServerChat(const ChatCmdOptions& o, ConversationSettings s, ChatKeep keep,
                   const Transcript* saved) {
  const std::string url = !o.server.empty() ? o.server : saved->server;
  std::string key = o.api_key;
  if (!o.api_key_file.empty()) key = ReadApiKeyFile(o.api_key_file);
  auto client = std::make_unique<ChatClient>(ParseServerAddress(url), key);
  std::string model = o.server_model;
  if (model.empty() && saved != nullptr && !saved->server.empty()) model = saved->model;
  if (model.empty()) model = client->Model();
  RemoteChatSession session(std::move(client), model, s, keep);
  if (saved != nullptr) std::fprintf(stderr, "%s\n", session.Resume(nullptr).c_str());
  RunFrontEnd(session, o);
}

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
    const std::string dir = o.chats_dir.empty() ? DefaultChatsDir() : o.chats_dir;
    keep.file = FindChat(dir, o.resume_name);
    saved = ReadTranscriptFile(keep.file);
    if (!o.server.empty() && saved.server.empty())
      throw Error(Cat("--resume: ", keep.file,
                      " was a chat with the model in this process (its token ids are the "
                      "model's): continue it without --server"));
  }
  if (!o.server.empty() || !saved.server.empty())
    return RunServerChat(o, s, keep, o.resume ? &saved : nullptr);
  if (o.resume) {
    // The saved chat's model and run options, unless --model says which model.
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
  LocalChatSession session(m, run, s, keep);
  if (o.resume) {
    const bool tty = isatty(STDERR_FILENO);
    const std::string line = session.Resume([tty](int fed, int total) {
      if (tty) std::fprintf(stderr, "\rresuming: re-prefilling %d of %d tokens\x1b[K", fed, total);
    });
    if (tty) std::fprintf(stderr, "\r\x1b[K");
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  RunFrontEnd(session, o);
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
  cmd->add_option("--server", o->server,
                  "Chat with the model a server runs: URL of `wormchat serve` or any "
                  "OpenAI-compatible server (llama-server, vLLM, ollama's http://host:11434/v1); "
                  "the conversation is kept here, replies stream from there");
  auto* key = cmd->add_option("--api-key", o->api_key,
                              "With --server: the key the server wants (Authorization: Bearer)");
  auto* key_file = cmd->add_option(
      "--api-key-file", o->api_key_file,
      "With --server: read --api-key from this file (one line), keeping it off the command line");
  key->excludes(key_file);
  cmd->add_option("--server-model", o->server_model,
                  "With --server: the model to ask for (default: the first the server lists at "
                  "/v1/models)");
  cmd->callback([o, cmd] {
    if (!o->server.empty() ||
        cmd->count("--api-key") + cmd->count("--api-key-file") + cmd->count("--server-model") > 0) {
      if (o->server.empty() && cmd->count("--resume") == 0)
        throw Error("--api-key, --api-key-file and --server-model go with --server URL");
      for (const CLI::Option* opt : cmd->get_options())
        if (opt->count() > 0 && !ServerChatOption(opt->get_name()))
          throw Error(Cat(opt->get_name(),
                          " chooses or runs the model in this process: with "
                          "--server the server decides it"));
    }
    o->seed_given = cmd->count("--seed") > 0;
    o->resume = cmd->count("--resume") > 0;
    o->model_given = cmd->count("--model") > 0;
    o->speculation_given = cmd->count("--speculate") + cmd->count("--speculate-k") +
                               cmd->count("--lookup-ngram") + cmd->count("--draft-model") >
                           0;
    CheckSpeculation(*cmd, o->run.speculation, o->beams);
    if (o->resume && o->no_save)
      throw Error("--resume continues a saved chat in its file; it cannot go with --no-save");
    // A model's generation_config.json defaults (its temperature, top-p, ...): a server applies
    // its own model's to what a request leaves out, so they are not read here for --server.
    if (o->server.empty())
      ApplyGenerationDefaults(*cmd, o->run.model_dir, &o->sampling, &o->max_new_tokens);
    RunChat(*o);
  });
}

}  // namespace wc
