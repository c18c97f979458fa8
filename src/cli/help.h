// What `headroom`, `headroom help [COMMAND]` and `headroom help --man` print, from the CLI's
// own option tree: the overview (one line and one example per command; README's "Commands"
// block is this text, tests/cli_first_hour_test.cc compares them) and the man page
// (headroom.1, installed by `make install`).
//
// Invariants: every subcommand has a help line (a missing one is a programming error, caught
// by the tests); the output depends only on the option tree, so it is deterministic.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

namespace headroom {

struct CommandHelp {
  const char* usage;
  const char* example;
};
const std::map<std::string, CommandHelp>& command_help();

// Every subcommand of `app`, in the order they were added.
std::vector<const CLI::App*> commands(const CLI::App& app);

std::string overview(const CLI::App& app);

// roff for man(1): every command with its usage, example and options.
std::string man_page(const CLI::App& app);

}  // namespace headroom
