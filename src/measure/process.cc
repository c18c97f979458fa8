#include "measure/process.h"

#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "util/error.h"

extern char** environ;

namespace headroom {

pid_t spawn_command(const std::vector<std::string>& argv) {
  if (argv.empty()) throw InputError("no command to run after --");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  // glibc's posix_spawnp reports a failed exec (not found, not executable) as its return value.
  int r = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (r != 0) throw InputError("cannot run '" + argv[0] + "': " + std::strerror(r));
  return pid;
}

namespace {

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

std::optional<int> poll_child(pid_t pid) {
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == 0) return std::nullopt;
  if (r < 0) return 1;  // not our child any more: nothing to report but a failure
  return exit_code(status);
}

int wait_child(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  return r < 0 ? 1 : exit_code(status);
}

bool process_exists(pid_t pid) {
  if (pid <= 0) return false;
  return kill(pid, 0) == 0 || errno == EPERM;
}

namespace {

// The parent pid in /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces and ')'.
std::optional<pid_t> parent_of(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(f, line)) return std::nullopt;
  size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  std::string state;
  long ppid = 0;
  if (!(rest >> state >> ppid)) return std::nullopt;
  return static_cast<pid_t>(ppid);
}

}  // namespace

std::vector<pid_t> process_tree(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
      if (std::optional<pid_t> ppid = parent_of(name)) children.emplace(*ppid, static_cast<pid_t>(std::stol(name)));
    }
    closedir(d);
  }
  std::vector<pid_t> tree{root};
  for (size_t i = 0; i < tree.size(); ++i) {
    auto [lo, hi] = children.equal_range(tree[i]);
    for (auto it = lo; it != hi; ++it) tree.push_back(it->second);
  }
  std::sort(tree.begin(), tree.end());
  return tree;
}

}  // namespace headroom
