// The status line of a command that runs longer than a second: on stderr, only when stderr is
// a terminal and --quiet was not given, first drawn one second after the command started (a
// short run never flickers), rewritten in place ("\r\033[K") when the status changes, and erased
// before the command prints its result. A background thread draws it, so a status shows even
// while one long library call (an integer program, a plan) runs.
//
// Invariants: nothing is written when disabled; after finish() (or the destructor) the line is
// erased and nothing more is written.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace headroom {

class Progress {
 public:
  // Whether any Progress draws: stderr a terminal and not quiet. Called once by main.
  static void configure(bool quiet);
  static bool quiet();

  explicit Progress(std::string status);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void set(std::string status);
  // Erases the line (if drawn) and stops drawing; the result may then be printed.
  void finish();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::string status_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace headroom
