// `headroom completion bash|zsh`: a shell completion script generated from the CLI's option
// tree (commands, each command's options), with the catalog's GPU names, the built-in models
// and the values of the options that take a fixed set. `make install` installs both scripts.
//
// Invariants: every option of every command is offered; the script depends only on the option
// tree and the catalogs, so it is deterministic.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace headroom {

std::string bash_completion(const CLI::App& app);
std::string zsh_completion(const CLI::App& app);

}  // namespace headroom
