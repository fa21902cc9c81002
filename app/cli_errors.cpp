#include "app/cli_errors.h"

#include <algorithm>

namespace wc {
namespace {

// The subcommand the parse reached (the app itself if none).
const CLI::App* ParsedCommand(const CLI::App& app) {
  const CLI::App* cmd = &app;
  while (true) {
    const std::vector<const CLI::App*> subs =
        cmd->get_subcommands([](const CLI::App* s) { return s->parsed(); });
    if (subs.empty()) return cmd;
    cmd = subs.front();
  }
}

std::string CommandPath(const CLI::App* cmd) {
  std::string path;
  for (const CLI::App* c = cmd; c != nullptr; c = c->get_parent())
    path = c->get_parent() == nullptr ? "wormchat" + path : " " + c->get_name() + path;
  return path;
}

std::vector<std::string> FlagNames(const CLI::App* cmd) {
  std::vector<std::string> names = {"--help"};
  for (const CLI::Option* o : cmd->get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

std::vector<std::string> SubcommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(s->get_name());
  return names;
}

}  // namespace

std::string UnknownSubcommandMessage(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return {};
  const std::string first = argv[1];
  if (first.empty() || first[0] == '-') return {};
  const std::vector<std::string> names = SubcommandNames(app);
  if (std::find(names.begin(), names.end(), first) != names.end()) return {};
  const std::string near = NearestName(first, names);
  return "unknown command '" + first + "'" +
         (near.empty() ? std::string() : "; did you mean '" + near + "'?") +
         " (wormchat --help lists the commands)";
}

std::string UsageMessage(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::App* cmd = ParsedCommand(app);
  const std::string help = " (see " + CommandPath(cmd) + " --help)";
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    std::vector<std::string> extras = cmd->remaining();
    if (extras.empty()) extras = app.remaining();
    for (const std::string& x : extras) {
      if (x.size() < 2 || x[0] != '-') continue;
      const std::string flag = x.substr(0, x.find('='));
      const std::string near = NearestName(flag, FlagNames(cmd));
      return "unknown flag " + flag +
             (near.empty() ? std::string() : "; did you mean " + near + "?") + help;
    }
    if (!extras.empty()) return "unexpected argument '" + extras.front() + "'" + help;
  }
  if (cmd == &app && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr &&
      app.get_subcommands().empty())
    return "a command is required (wormchat --help lists them)";
  return e.what() + help;
}

}  // namespace wc
