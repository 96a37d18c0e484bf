// Note [Errors]
// ~~~~~~~~~~~~~
// Every error trident throws is a trident::Error, and its kind
// alone decides the exit code (docs/design.md, "Errors and exit codes"):
//
//   ErrorKind::kBadInput  exit 2: something the user gave is wrong — a
//                         config key, a flag, a data file, a plan, a run
//                         directory, the launcher's environment. The line
//                         names the field, the value and what is allowed.
//   ErrorKind::kFailure   exit 1: something went wrong while running — a
//                         peer lost, a timeout, a disk full, a shape a stage
//                         did not declare, a non-finite loss.
//
// Each component names its errors by what they are about (ConfigError,
// PlanError, CommError, ...): one ComponentError template, instantiated with
// a tag and the kind the component's errors usually have, so catch sites can
// tell components apart; a throw site that knows better passes the other kind.
//
// Context: where an error happened — world rank, stage, replica,
// micro-batch, schedule action, edge, config field — is added by whoever
// knows it, innermost first (add_context fills only what is still unknown),
// and what() always prints it the same way, before the message:
//
//   rank 2, stage 1, replica 0, micro-batch 3, action B3: <message>
//
// An exception that is not a trident::Error reaching main() is a bug in
// trident (or a library's failure it did not anticipate): exit 1.
#pragma once

#include <exception>
#include <optional>
#include <string>

namespace trident {

enum class ErrorKind { kBadInput, kFailure };

// The exit codes of every trident command, here and nowhere else: success,
// a failure while running, bad input, stopped by SIGINT or SIGTERM (after a
// checkpoint; 128 + SIGINT, as a shell reports it).
inline constexpr int kExitOk = 0, kExitFailure = 1, kExitBadInput = 2, kExitInterrupted = 130;

// kExitBadInput for bad input, kExitFailure for a failure while running.
int exit_code(ErrorKind kind);

struct ErrorContext {
  std::optional<int> rank, stage, replica, micro_batch;
  std::string action;  // a schedule action, "F3", or an operation, "checkpoint"
  std::string edge;    // "'block1.cat' (stage 0 -> stage 2)"
  std::string field;   // a config key or dataset field
  bool empty() const;
  // "rank 2, stage 1, replica 0, micro-batch 3, action B3, edge ..., field ..."
  std::string describe() const;
  // Fills the fields still unknown here from `outer`.
  void fill(const ErrorContext& outer);
};

class Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string message, ErrorContext context = {});
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return trident::exit_code(kind_); }
  const std::string& message() const { return message_; }
  const ErrorContext& context() const { return context_; }
  // Adds what is not yet known (see Note [Errors]); returns *this to rethrow.
  Error& add_context(const ErrorContext& outer);
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  ErrorKind kind_;
  std::string message_;
  ErrorContext context_;
  std::string what_;
};

// A component's error type: `using PlanError = ComponentError<struct
// PlanErrorTag, ErrorKind::kBadInput>;`. Only the tag and the default differ.
template <class Tag, ErrorKind kDefaultKind>
class ComponentError : public Error {
 public:
  explicit ComponentError(std::string message, ErrorKind kind = kDefaultKind, ErrorContext context = {})
      : Error(kind, std::move(message), std::move(context)) {}
};

// Bad input that belongs to no component's error (a flag of the command line).
class InputError : public Error {
 public:
  explicit InputError(std::string message, ErrorContext context = {})
      : Error(ErrorKind::kBadInput, std::move(message), std::move(context)) {}
};

// A failure while running that belongs to no component's error.
class Failure : public Error {
 public:
  explicit Failure(std::string message, ErrorContext context = {})
      : Error(ErrorKind::kFailure, std::move(message), std::move(context)) {}
};

// One line for a person: what() up to its first newline (libraries such as
// c10 append backtraces after it).
std::string first_line(const std::exception& e);

}  // namespace trident
