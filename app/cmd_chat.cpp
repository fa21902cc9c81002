// `wormchat chat`: a line-mode chat REPL. The conversation stays in the KV cache across turns;
// commands start with '/' so they cannot collide with a real prompt.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "app/commands.h"
#include "app/model_options.h"
#include "app/stdout_sink.h"
#include "serving/serving_loop.h"
#include "serving/waiting_observer.h"
#include "util/error.h"

namespace wc {
namespace {

struct ChatCmdOptions {
  ModelRunOptions run = ServingRunDefaults();
  int max_new_tokens = 256;
  SamplingParams sampling;
  uint64_t seed = 0;
  int beams = 0;  // --beams / `/beams W`: 0 samples, else beam search with W beams
};

// Ctrl-C while a reply streams cancels that reply; at the prompt it ends the chat as usual.
std::atomic<bool> g_generating{false};
std::atomic<bool> g_cancel{false};

void OnInterrupt(int) {
  if (g_generating.load()) {
    g_cancel.store(true);
  } else {
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
  }
}

const char kHelp[] =
    "Type a message and press Enter. Commands: /reset (new conversation), /beams W (beam search "
    "with W beams, 1-16; /beams 0 samples again), /help, /quit.\n";

// `/beams W`: the new beam count, or an error message.
bool ParseBeamsCommand(const std::string& line, int& beams, std::string& error) {
  const std::string arg = line.size() > 6 ? line.substr(7) : "";
  size_t used = 0;
  int w = -1;
  try {
    w = std::stoi(arg, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (arg.empty() || used != arg.size() || w < 0 || w > kMaxBeams) {
    error =
        Cat("/beams needs a number of beams in [1, ", kMaxBeams, "] (0: sample), got '", arg, "'");
    return false;
  }
  beams = w;
  return true;
}

void RunChat(const ChatCmdOptions& o) {
  o.sampling.Validate();
  if (o.beams < 0 || o.beams > kMaxBeams)
    throw Error(Cat("--beams must be in [0, ", kMaxBeams, "] (0: sample), got ", o.beams));
  int beams = o.beams;
  if (o.max_new_tokens < 1) throw Error(Cat("-n must be >= 1, got ", o.max_new_tokens));
  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/true);
  const FalconConfig& c = m.model->config();
  const ChatFormat format = m.chat_format.value_or(ChatFormat{});
  // Rows enough for the widest beam search (a paged pool's pages are touched only when used).
  ServingLoop loop(*m.model, m.tokenizer.get(), format, ServingOptionsFor(o.run, m, kMaxBeams));
  const SessionId session = loop.OpenSession();
  StdoutSink sink;
  const bool interactive = isatty(STDIN_FILENO);
  if (interactive) {
    std::printf("wormchat — %s (%d layers, hidden %d, %d heads / %d KV heads), context %d\n%s",
                m.dir.c_str(), c.n_layers, c.hidden_size, c.n_head, c.n_kv_heads, m.ctx, kHelp);
  }
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  int session_pos = 0;             // tokens the conversation holds
  bool reset_next = false;         // start the session over with the next turn
  bool end_previous_turn = false;  // feed EOS before the next user turn (format's end_of_turn)
  std::string line;
  while (true) {
    if (interactive) std::printf("\n> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line == "/quit" || line == "/exit") break;
    if (line == "/help") {
      std::printf("%s", kHelp);
      continue;
    }
    if (line == "/reset") {
      session_pos = 0;
      reset_next = true;
      end_previous_turn = false;
      std::printf("(new conversation)\n");
      continue;
    }
    if (line == "/beams" || line.rfind("/beams ", 0) == 0) {
      std::string error;
      if (!ParseBeamsCommand(line, beams, error)) {
        std::printf("%s\n", error.c_str());
      } else if (beams == 0) {
        std::printf("(sampling)\n");
      } else {
        std::printf("(beam search with %d beam%s: replies show the best hypothesis)\n", beams,
                    beams == 1 ? "" : "s");
      }
      continue;
    }
    if (!line.empty() && line[0] == '/') {
      std::printf("unknown command %s; %s", line.c_str(), kHelp);
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::vector<int> ids;
    if (session_pos == 0 && format.add_bos) ids.push_back(c.bos_token_id);
    if (end_previous_turn) ids.push_back(c.eos_token_id);
    const std::vector<int> turn = format.EncodeUserTurn(*m.tokenizer, line);
    ids.insert(ids.end(), turn.begin(), turn.end());
    if (session_pos + static_cast<int>(ids.size()) + 1 >= m.ctx) {
      session_pos = 0;
      reset_next = true;
      std::printf("(context of %d tokens is full: starting a new conversation)\n", m.ctx);
      ids.clear();
      if (format.add_bos) ids.push_back(c.bos_token_id);
      ids.insert(ids.end(), turn.begin(), turn.end());
      if (static_cast<int>(ids.size()) + 1 >= m.ctx) {
        std::printf("(message of %zu tokens is too long for the context of %d; shorten it)\n",
                    ids.size(), m.ctx);
        continue;
      }
    }
    Request r;
    r.prompt_ids = std::move(ids);
    r.chat = true;
    r.sampling = o.sampling;
    r.seed = o.seed;
    r.max_new_tokens = o.max_new_tokens;
    r.session = session;
    r.reset_session = reset_next;
    if (beams > 0) {
      BeamParams b;
      b.num_beams = beams;
      r.beams = b;
    }
    auto observer = std::make_shared<WaitingObserver>(&sink);
    r.observer = observer;
    if (interactive) std::printf("\n");
    std::fflush(stdout);
    g_cancel.store(false);
    g_generating.store(true);
    const RequestId id = loop.Submit(std::move(r));
    const RequestResult* res;
    while ((res = observer->WaitFor(std::chrono::milliseconds(20))) == nullptr)
      if (g_cancel.exchange(false)) loop.Cancel(id);
    g_generating.store(false);
    if (res->reason == StopReason::kError) throw Error(res->error);
    reset_next = false;
    session_pos = res->session_pos;
    std::printf(res->reason == StopReason::kCancelled ? " [cancelled]\n" : "\n");
    end_previous_turn = format.eos_ends_turn;
  }
  std::fflush(stdout);
  loop.Shutdown(ShutdownMode::kCancel);
}

}  // namespace

void RegisterChat(CLI::App& app) {
  auto o = std::make_shared<ChatCmdOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "Chat with the model (line mode)");
  AddModelRunOptions(cmd, o->run);
  cmd->add_option("-n,--max-new-tokens", o->max_new_tokens, "Most tokens per reply")
      ->capture_default_str();
  AddSamplingOptions(cmd, o->sampling, o->seed);
  cmd->add_option("--beams", o->beams,
                  "Reply by beam search with W beams (1-16; 0 samples); /beams W changes it")
      ->capture_default_str();
  cmd->callback([o] { RunChat(*o); });
}

}  // namespace wc
