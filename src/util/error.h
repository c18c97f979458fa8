// Errors of headroom. Two kinds, kept apart on purpose:
//  - InputError: a recoverable problem with what the user gave (unknown model, bad number, a size
//    that overflows). It carries one line that names the thing and the numbers involved: control
//    bytes in the message (a newline typed into an option, a name read from a file) are written as
//    \xNN by the constructor, so no caller can break the line. Library
//    entry points turn it into a Result; the CLI prints it and exits with code 2.
//  - HEADROOM_CHECK: a broken internal invariant. It stops loudly (std::logic_error) because
//    continuing would print a wrong number.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include "util/format.h"

namespace headroom {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(escape_control(message)) {}
};

[[noreturn]] void check_failed(const char* expr, const char* file, int line, const std::string& why);

#define HEADROOM_CHECK(cond, why)                                         \
  do {                                                                    \
    if (!(cond)) ::headroom::check_failed(#cond, __FILE__, __LINE__, why); \
  } while (0)

// A value or the one-line message of an InputError.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  static Result failure(std::string message) { return Result(Error{std::move(message)}); }
  bool ok() const { return v_.index() == 0; }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const std::string& error() const { return std::get<1>(v_).message; }

 private:
  struct Error { std::string message; };
  explicit Result(Error e) : v_(std::move(e)) {}
  std::variant<T, Error> v_;
};

// Runs fn and turns an InputError into a failed Result.
template <typename Fn>
auto capture_input_errors(Fn&& fn) -> Result<decltype(fn())> {
  try {
    return fn();
  } catch (const InputError& e) {
    return Result<decltype(fn())>::failure(e.what());
  }
}

}  // namespace headroom
