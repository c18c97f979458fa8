#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace headroom {
namespace {

bool g_enabled = false;
bool g_quiet = false;

// One second unless HEADROOM_PROGRESS_DELAY_MS says otherwise (the tests use 0).
std::chrono::milliseconds delay() {
  const char* env = std::getenv("HEADROOM_PROGRESS_DELAY_MS");
  if (env != nullptr) {
    char* end = nullptr;
    long ms = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && ms >= 0 && ms <= 60000) return std::chrono::milliseconds(ms);
  }
  return std::chrono::milliseconds(1000);
}

void draw(const std::string& line) {
  std::fputs(("\r\033[K" + line).c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace

void Progress::configure(bool quiet) {
  g_quiet = quiet;
  g_enabled = !quiet && isatty(STDERR_FILENO) != 0;
}

bool Progress::quiet() { return g_quiet; }

Progress::Progress(std::string status) : status_(std::move(status)) {
  if (g_enabled) thread_ = std::thread([this] { run(); });
}

Progress::~Progress() { finish(); }

void Progress::set(std::string status) {
  std::lock_guard<std::mutex> lock(mutex_);
  status_ = std::move(status);
  wake_.notify_all();
}

void Progress::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void Progress::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (wake_.wait_for(lock, delay(), [this] { return stop_; })) return;
  std::string drawn;
  while (!stop_) {
    if (status_ != drawn) {
      drawn = status_;
      draw(drawn + "...");
    }
    wake_.wait(lock, [&] { return stop_ || status_ != drawn; });
  }
  draw("");
}

}  // namespace headroom
