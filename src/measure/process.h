// The processes `headroom watch` follows: a command it starts (posix_spawnp, inheriting the
// environment and the terminal), or a running pid; and a process's descendants, read from /proc,
// because NVML reports the process that holds the CUDA context, which may be a child of the one
// started (a shell, a launcher).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace headroom {

// Starts `argv` (searched on PATH). InputError with the system's reason when it cannot start.
pid_t spawn_command(const std::vector<std::string>& argv);

// The exit status of a child started by spawn_command, without waiting: its exit code, or
// 128 + the signal that killed it (the shell's convention); unset while it runs.
std::optional<int> poll_child(pid_t pid);
// Waits for the child and returns its status as poll_child does.
int wait_child(pid_t pid);

// True while a process with this pid exists (also when it belongs to another user).
bool process_exists(pid_t pid);

// `root` and every process descending from it, sorted (from /proc/*/stat; a process that exits
// while the table is read is simply missing).
std::vector<pid_t> process_tree(pid_t root);

}  // namespace headroom
