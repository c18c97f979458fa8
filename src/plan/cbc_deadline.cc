#include "plan/cbc_deadline.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

namespace headroom {
namespace {

// The child's answer: a fixed header, then `columns` doubles when there is a solution.
struct Header {
  uint8_t has_solution, proven_optimal, proven_infeasible, pad[5];
  double objective, best_possible;
};

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

[[noreturn]] void child(Cbc_Model* model, int columns, int fd) {
  Cbc_solve(model);
  Header h{};
  const double* best = Cbc_bestSolution(model);
  h.has_solution = best != nullptr;
  h.proven_optimal = Cbc_isProvenOptimal(model) != 0;
  h.proven_infeasible = Cbc_isProvenInfeasible(model) != 0;
  h.objective = best ? Cbc_getObjValue(model) : 0;
  h.best_possible = Cbc_getBestPossibleObjValue(model);
  bool ok = write_all(fd, &h, sizeof h);
  if (ok && best) ok = write_all(fd, best, sizeof(double) * static_cast<size_t>(columns));
  ::_exit(ok ? 0 : 1);
}

}  // namespace

CbcOutcome solve_cbc_with_deadline(Cbc_Model* model, int columns, double wall_seconds) {
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wall_seconds));
  CbcOutcome out;
  int fds[2];
  if (::pipe(fds) != 0) return out;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return out;
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(model, columns, fds[1]);
  }
  ::close(fds[1]);
  std::string bytes;
  const size_t want = sizeof(Header);
  bool eof = false;
  char buf[1 << 16];
  while (!eof) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    if (r == 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
      break;
    }
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (!eof) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!eof || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || bytes.size() < want) return out;
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  out.has_solution = h.has_solution != 0;
  const size_t need = want + (out.has_solution ? sizeof(double) * static_cast<size_t>(columns) : 0);
  if (bytes.size() != need) return out;
  out.finished = true;
  out.proven_optimal = h.proven_optimal != 0;
  out.proven_infeasible = h.proven_infeasible != 0;
  out.objective = h.objective;
  out.best_possible = h.best_possible;
  if (out.has_solution) {
    out.solution.resize(static_cast<size_t>(columns));
    std::memcpy(out.solution.data(), bytes.data() + want, sizeof(double) * static_cast<size_t>(columns));
  }
  return out;
}

}  // namespace headroom
