#include "cli/help.h"

#include <fmt/format.h>

#include "util/error.h"

namespace headroom {
namespace {

// roff text: backslashes escaped, a line never starts with a control character, '-' literal.
std::string roff(const std::string& text) {
  std::string s;
  for (char c : text) {
    if (c == '\\') s += "\\e";
    else if (c == '-') s += "\\-";
    else s += c;
  }
  if (!s.empty() && (s[0] == '.' || s[0] == '\'')) s = "\\&" + s;
  return s;
}

// "--batch", "-o, --output" and "MODEL" as the option tree names them.
std::string option_names(const CLI::Option* opt) {
  std::string names = opt->get_name(false, true);
  if (names.empty()) names = opt->get_name();
  std::string value = opt->get_expected_max() == 0 || opt->get_positional() ? "" : " " + std::string("VALUE");
  return names + value;
}

}  // namespace

const std::map<std::string, CommandHelp>& command_help() {
  static const std::map<std::string, CommandHelp> help = {
      {"estimate", {"estimate MODEL", "headroom estimate resnet50 --batch 32"}},
      {"fit", {"fit MODEL --gpu NAME", "headroom fit gpt2 --gpu T4"}},
      {"plan", {"plan MODEL --gpu NAME", "headroom plan gpt2 --batch 8 --gpu T4"}},
      {"report", {"report MODEL -o FILE", "headroom report resnet50 -o report.html"}},
      {"pack", {"pack MODEL...", "headroom pack resnet50 vgg16 --gpu T4"}},
      {"models", {"models", "headroom models"}},
      {"gpus", {"gpus", "headroom gpus"}},
      {"watch", {"watch -- COMMAND", "headroom watch -o run.csv -- python train.py"}},
      {"completion", {"completion bash|zsh", "headroom completion bash > ~/.local/share/bash-completion/completions/headroom"}},
      {"help", {"help [COMMAND]", "headroom help plan"}},
  };
  return help;
}

std::string overview(const CLI::App& app) {
  std::string s = "headroom " HEADROOM_VERSION ": how much GPU memory a model needs, before you run it\n\n";
  for (const CLI::App* sub : commands(app)) {
    auto it = command_help().find(sub->get_name());
    HEADROOM_CHECK(it != command_help().end(), "no help line for command " + sub->get_name());
    s += fmt::format("  {:<22} {}\n  {:<22}   e.g. {}\n", it->second.usage, sub->get_description(), "",
                     it->second.example);
  }
  s += "\nMODEL is a built-in model (headroom models), NAME:key=value,..., an .onnx file, or a Hugging Face\n"
       "config.json (or the checkpoint folder holding one).\n"
       "headroom help COMMAND (or headroom COMMAND --help) lists a command's options.\n";
  return s;
}

std::string man_page(const CLI::App& app) {
  std::string s = ".TH HEADROOM 1 \"\" \"headroom " HEADROOM_VERSION "\" \"User Commands\"\n";
  s += ".SH NAME\nheadroom \\- how much GPU memory a model needs, before you run it\n";
  s += ".SH SYNOPSIS\n.B headroom\n.I COMMAND\n[\\fIOPTIONS\\fR]\n";
  s += ".SH DESCRIPTION\n"
       "headroom predicts the peak GPU memory of inference, generation or a training step of a model, "
       "finds the largest batch or sequence that fits a GPU, plans how to fit under a budget "
       "(accumulation, checkpointing, offload, several GPUs), packs several models on one GPU, and "
       "measures GPU memory while a command runs. It simulates every allocation of the run on PyTorch's "
       "caching allocator, without a GPU.\n"
       ".PP\n"
       "MODEL is a built-in model (\\fBheadroom models\\fR), NAME:key=value,..., an .onnx file, or a "
       "Hugging Face config.json (or the checkpoint folder holding one).\n";
  s += ".SH COMMANDS\n";
  for (const CLI::App* sub : commands(app)) {
    auto it = command_help().find(sub->get_name());
    HEADROOM_CHECK(it != command_help().end(), "no help line for command " + sub->get_name());
    s += ".SS \"headroom " + roff(it->second.usage) + "\"\n";
    s += roff(sub->get_description()) + ".\n.PP\nExample: \\fB" + roff(it->second.example) + "\\fR\n";
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->get_name() == "--help") continue;
      s += ".TP\n.B " + roff(option_names(opt)) + "\n" + roff(opt->get_description()) + "\n";
    }
  }
  s += ".SH GLOBAL OPTIONS\n"
       ".TP\n.B \\-q, \\-\\-quiet\nno progress line and no \"wrote FILE\" notes on standard error\n"
       ".TP\n.B \\-\\-version\nthe version\n";
  s += ".SH EXIT STATUS\n"
       "0 on success; 2 when the input is wrong (one line on standard error names what, nothing on "
       "standard output); 3 on an internal error. \\fBwatch\\fR exits with the watched command's status.\n";
  s += ".SH ENVIRONMENT\n"
       ".TP\n.B NO_COLOR\nno colours in text output on a terminal\n"
       ".TP\n.B HEADROOM_PROGRESS_DELAY_MS\nhow long a command runs before its progress line shows "
       "(default 1000)\n";
  s += ".SH SEE ALSO\nREADME.md and docs/ of the headroom sources; \\fBheadroom help\\fR \\fICOMMAND\\fR.\n";
  return s;
}

std::vector<const CLI::App*> commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

}  // namespace headroom
